//! Links `target/PROFILE/cyclix` to the binary cargo writes below the target triple's
//! directory (`target/x86_64-unknown-linux-gnu/PROFILE/cyclix`), which `.cargo/config.toml`
//! asks for so the binary can be linked static. Scripts, the testbed (`/src/target/debug/cyclix`)
//! and the README's install step keep their paths. The link is relative, so it holds wherever
//! the tree is mounted; a plain file there (a build from before) is replaced.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let (Some(out), Some(target)) = (std::env::var_os("OUT_DIR"), std::env::var_os("TARGET"))
    else {
        return;
    };
    // OUT_DIR = TARGET_DIR/TRIPLE/PROFILE_DIR/build/cyclix-HASH/out
    let out = PathBuf::from(out);
    let Some(profile_dir) = out.ancestors().nth(3) else {
        return;
    };
    let Some(triple_dir) = profile_dir.parent() else {
        return;
    };
    if triple_dir.file_name() != Some(target.as_os_str()) {
        return; // no --target build: the binary is in target/PROFILE already
    }
    let (Some(target_dir), Some(profile)) = (triple_dir.parent(), profile_dir.file_name()) else {
        return;
    };
    let link_dir = target_dir.join(profile);
    let link = link_dir.join("cyclix");
    let dest = Path::new("..").join(&target).join(profile).join("cyclix");
    if std::fs::read_link(&link).is_ok_and(|d| d == dest) {
        return;
    }
    if let Err(e) = std::fs::create_dir_all(&link_dir)
        .and_then(|()| match std::fs::remove_file(&link) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        })
        .and_then(|()| std::os::unix::fs::symlink(&dest, &link))
    {
        println!(
            "cargo:warning=could not link {} to {}: {e}",
            link.display(),
            dest.display()
        );
    }
}

//! Credentials (P22, P23): every readable environment (values only as sha256), the
//! session and user keyrings.

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};

use sha2::{Digest as _, Sha256};

use crate::probe::Context;
use crate::probe::sys::{self};
use crate::probe::verdict::credentials as v;
use crate::probe::verdict::{Judged, errno_name};

fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b).iter().fold(String::new(), |mut s, x| {
        use std::fmt::Write as _;
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// P22: our environment and every readable `/proc/*/environ`.
#[must_use]
pub fn p22(ctx: &Context) -> Judged {
    let mut o = v::EnvObs::default();
    let mut files = vec!["/proc/self/environ".to_string()];
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.filter_map(Result::ok) {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.bytes().all(|b| b.is_ascii_digit()) {
                files.push(format!("/proc/{n}/environ"));
            }
        }
    }
    for f in files {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        o.sources += 1;
        for kv in bytes.split(|b| *b == 0).filter(|kv| !kv.is_empty()) {
            let (k, val) = match kv.iter().position(|b| *b == b'=') {
                Some(i) => (&kv[..i], &kv[i + 1..]),
                None => (kv, &[][..]),
            };
            o.vars.push((
                f.clone(),
                String::from_utf8_lossy(k).into_owned(),
                sha256_hex(val),
            ));
        }
    }
    v::p22(&o, ctx)
}

/// Describes a key (`type;uid;gid;perm;description`), or its errno.
fn describe(key: i32) -> String {
    let mut buf = [0u8; 512];
    match sys::keyctl_describe(key, &mut buf) {
        Ok(_) => String::from_utf8_lossy(buf.split(|b| *b == 0).next().unwrap_or(&[])).into_owned(),
        Err(e) => errno_name(e),
    }
}

/// Reads a keyring: its own description and the descriptions of the keys linked to it.
fn keyring(special: i32) -> v::Keyring {
    let mut buf = [0u8; 4096];
    let linked = sys::keyctl_read(special, &mut buf).map(|n| {
        let n = usize::try_from(n).unwrap_or(0).min(buf.len());
        buf[..n]
            .chunks_exact(4)
            .map(|c| {
                let id = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                let d = describe(id);
                let mut inner = [0u8; 4096];
                let n = if d.starts_with("keyring;") {
                    sys::keyctl_read(id, &mut inner).map(|n| usize::try_from(n / 4).unwrap_or(0))
                } else {
                    Ok(1)
                };
                (d, n)
            })
            .collect()
    });
    v::Keyring {
        own: describe(special),
        linked,
    }
}

/// P23.
#[must_use]
pub fn p23(_: &Context) -> Judged {
    let null = std::fs::metadata("/dev/null").map(|m| m.rdev()).ok();
    let masked = std::fs::metadata("/proc/keys")
        .is_ok_and(|m| m.file_type().is_char_device() && Some(m.rdev()) == null);
    v::p23(masked, &keyring(-3), &keyring(-4))
}

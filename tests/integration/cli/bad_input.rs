//! Issue 18, item 8, through the binary: `spec validate` prints the normalised form of every
//! allowlist host it changed, and in the tenants directory refuses a file whose name is not
//! its tenant (as `run` and `check` do).

use std::process::Command;

use super::text;

const SPEC: &str = "tenant: hosts
repo: { path: /srv/min, base: main }
task: { text: x }
agent:
  image: registry.example.com/agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  command: [agent]
gate:
  image: registry.example.com/gate@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  command: [make, test]
egress:
  allow: [\"\u{24d4}xample.com\", \"PyPI.org.\", \"files\u{3002}example.org\", \"*.Pythonhosted.org\", ok.example.net]
";

fn validate(home: &std::path::Path, file: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cyclix"))
        .args(["spec", "validate"])
        .arg(file)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env("XDG_RUNTIME_DIR", home)
        .output()
        .expect("run cyclix")
}

#[test]
fn spec_validate_names_each_host_it_normalised_and_the_tenant_file_mismatch() {
    let home = tempfile::tempdir().expect("home");
    let tenants = home.path().join(".config/cyclix/tenants");
    std::fs::create_dir_all(&tenants).expect("dir");
    let f = tenants.join("hosts.yaml");
    std::fs::write(&f, SPEC).expect("write");
    let o = validate(home.path(), &f);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let file = f.display();
    assert_eq!(
        text(&o.stderr),
        format!(
            "{file}:11:11: egress.allow[0]: `\u{24d4}xample.com` is read as `example.com`\n\
             {file}:11:26: egress.allow[1]: `PyPI.org.` is read as `pypi.org`\n\
             {file}:11:39: egress.allow[2]: `files\u{3002}example.org` is read as `files.example.org`\n\
             {file}:11:60: egress.allow[3]: `*.Pythonhosted.org` is read as `*.pythonhosted.org`\n"
        )
    );
    // The same spec under another name in the tenants directory: refused, nothing else said.
    let other = tenants.join("other.yaml");
    std::fs::rename(&f, &other).expect("rename");
    let o = validate(home.path(), &other);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "{}: the spec names tenant `hosts`, but its file is other.yaml: `cyclix run` and `cyclix check` would refuse it\n  fix: rename the file to hosts.yaml, or set `tenant:` to the file's name\n",
            other.display()
        )
    );
    // Outside the tenants directory a spec may have any name (`--spec FILE`).
    let elsewhere = home.path().join("elsewhere.yaml");
    std::fs::rename(&other, &elsewhere).expect("rename");
    let o = validate(home.path(), &elsewhere);
    assert_eq!(o.status.code(), Some(0));
    // ... and it says where the file must go to be installed (the newcomer's trial).
    assert!(
        text(&o.stderr).contains(&format!(
            "note: the spec names tenant `hosts`: installed, it must be {}/hosts.yaml",
            tenants.display()
        )),
        "{}",
        text(&o.stderr)
    );
}

//! The pure core may not do I/O: `spec`, `tier`, `render`, `host::checks` and `twin` never name `std::fs`,
//! `std::process`, `std::env` or `zbus` (DESIGN.md "Code layout").

use std::path::Path;

const FORBIDDEN: [&str; 6] = [
    "std::fs",
    "std::process",
    "std::env",
    "zbus",
    "std::net",
    "Command::new",
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Lines of `text` (comments stripped) that name a forbidden item.
fn violations(text: &str) -> Vec<(usize, &'static str)> {
    let mut hits = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for bad in FORBIDDEN {
            if code.contains(bad) {
                hits.push((n + 1, bad));
            }
        }
    }
    hits
}

#[test]
fn pure_modules_do_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![
        src.join("spec.rs"),
        src.join("tier.rs"),
        src.join("render.rs"),
        src.join("host/checks.rs"),
        src.join("twin.rs"),
    ];
    rust_files(&src.join("host/checks"), &mut files);
    rust_files(&src.join("twin"), &mut files);
    rust_files(&src.join("spec"), &mut files);
    rust_files(&src.join("render"), &mut files);
    assert!(
        files.len() >= 10,
        "expected the pure modules, found {files:?}"
    );
    let mut hits = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        for (line, bad) in violations(&text) {
            hits.push(format!("{}:{line}: {bad}", f.display()));
        }
    }
    assert!(
        hits.is_empty(),
        "pure modules must not do I/O:\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_guard_catches_planted_violations_and_ignores_comments() {
    let planted = "fn f() {\n    let t = std::fs::read_to_string(p);\n    // std::process is fine in a comment\n    let c = zbus::Connection::session();\n}\n";
    assert_eq!(violations(planted), vec![(2, "std::fs"), (4, "zbus")]);
}

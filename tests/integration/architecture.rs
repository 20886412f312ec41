//! The pure core may not do I/O: `spec`, `tier`, `render`, `host::checks` and `twin` never name `std::fs`,
//! `std::process`, `std::env` or `zbus` (DESIGN.md "Code layout").

use std::path::Path;

mod app_verbs;
mod run_floors;

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
            // An address type (`std::net::Ipv4Addr`) is a value, not I/O.
            let io = code
                .match_indices(bad)
                .any(|(i, _)| bad != "std::net" || !code[i + bad.len()..].starts_with("::Ip"));
            if io {
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
        src.join("gate.rs"),
        src.join("drill.rs"),
        src.join("images/agents.rs"),
        src.join("agents.rs"),
        src.join("app/runs_cmd/svg.rs"),
        src.join("metrics.rs"),
    ];
    rust_files(&src.join("drill"), &mut files);
    rust_files(&src.join("agents"), &mut files);
    rust_files(&src.join("host/checks"), &mut files);
    rust_files(&src.join("twin"), &mut files);
    rust_files(&src.join("spec"), &mut files);
    rust_files(&src.join("render"), &mut files);
    rust_files(&src.join("metrics"), &mut files);
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
    let planted = "fn f() {\n    let t = std::fs::read_to_string(p);\n    // std::process is fine in a comment\n    let c = zbus::Connection::session();\n    let a: std::net::Ipv4Addr = s.parse()?;\n    let s = std::net::TcpStream::connect(a);\n}\n";
    assert_eq!(
        violations(planted),
        vec![(2, "std::fs"), (4, "zbus"), (6, "std::net")]
    );
}

/// `text` without its `#[cfg(test)]` items (unit tests may spawn what they like).
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    let mut depth = 0i32;
    for line in text.lines() {
        if !skipping && line.trim_start().starts_with("#[cfg(test)]") {
            skipping = true;
            depth = 0;
            continue;
        }
        if skipping {
            depth += i32::try_from(line.matches('{').count()).unwrap_or(0);
            depth -= i32::try_from(line.matches('}').count()).unwrap_or(0);
            // `mod tests;` (a file of its own) or the end of the item's braces.
            if depth <= 0 && (line.contains('}') || line.trim_end().ends_with(';')) {
                skipping = false;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Code lines (comments stripped, tests dropped) of every file below `src/`, by path
/// relative to `src/`.
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .filter(|f| {
            f.file_name()
                .is_none_or(|n| n != "tests.rs" && !n.to_string_lossy().ends_with("_tests.rs"))
        })
        .filter(|f| !f.components().any(|c| c.as_os_str() == "tests"))
        .map(|f| {
            let rel = f
                .strip_prefix(&src)
                .expect("below src")
                .display()
                .to_string();
            let text = std::fs::read_to_string(&f).expect("read");
            let code: String = without_tests(&text)
                .lines()
                .map(|l| l.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            (rel, code)
        })
        .collect()
}

/// Whether `rel` (a path below `src/`) is module `module` or inside it (`podman` matches
/// `podman.rs` and `podman/…`).
fn is_in(rel: &str, module: &str) -> bool {
    rel == format!("{module}.rs") || rel.starts_with(&format!("{module}/"))
}

/// Each external interface is reached from its one adapter (issue 12 item 6): D-Bus only from
/// `systemd/dbus*`, and the process runners (`process::run*`) only from the adapters of the
/// tools they run — podman, git, journalctl and the host-facts probes (quadlet -version,
/// getcap, the podman version); the in-sandbox probe suite spawns its own helpers.
#[test]
fn each_external_interface_is_called_from_its_one_adapter() {
    let adapters = [
        "podman",
        "git",
        "journal",
        "host/facts",
        "process",
        "probe/observe",
        "notify",
        "cluster",
    ];
    let mut hits = Vec::new();
    for (rel, code) in sources() {
        for (n, line) in code.lines().enumerate() {
            if line.contains("zbus") && !is_in(&rel, "systemd/dbus") {
                hits.push(format!("src/{rel}:{}: zbus outside systemd/dbus", n + 1));
            }
            let runs = line.contains("process::run") || line.contains("Command::new");
            if runs && !adapters.iter().any(|a| is_in(&rel, a)) {
                hits.push(format!(
                    "src/{rel}:{}: spawns a process outside the adapters {adapters:?}",
                    n + 1
                ));
            }
        }
    }
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

/// The probe verdicts, the limits, naming and layout are pure like the rest of the core.
#[test]
fn verdicts_limits_names_and_paths_are_pure() {
    let pure = ["probe/verdict", "limits", "naming", "layout"];
    let mut seen = 0;
    let mut hits = Vec::new();
    for (rel, code) in sources() {
        if !pure.iter().any(|p| is_in(&rel, p)) {
            continue;
        }
        seen += 1;
        for (line, bad) in violations(&code) {
            hits.push(format!("src/{rel}:{line}: {bad}"));
        }
    }
    assert!(
        seen >= pure.len(),
        "expected the pure files {pure:?}, found {seen}"
    );
    assert!(
        hits.is_empty(),
        "pure modules must not do I/O:\n{}",
        hits.join("\n")
    );
}

type Graph = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// Every circle among the modules of `edges` (module -> modules it names), as `a -> b -> a`.
fn circles(edges: &Graph) -> Vec<String> {
    fn visit(
        m: &str,
        edges: &Graph,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
        circles: &mut Vec<String>,
    ) {
        if let Some(i) = path.iter().position(|p| p == m) {
            circles.push(format!("{} -> {m}", path[i..].join(" -> ")));
            return;
        }
        if !done.insert(m.to_string()) {
            return;
        }
        path.push(m.to_string());
        for d in edges.get(m).into_iter().flatten() {
            visit(d, edges, path, done, circles);
        }
        path.pop();
    }
    let mut found = Vec::new();
    let mut done = std::collections::BTreeSet::new();
    for m in edges.keys() {
        visit(m, edges, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

/// Layers point one way: nothing below `app` imports it (only `main.rs` and `app` itself), and
/// the top-level modules form no circle.
#[test]
fn layers_point_one_way_and_modules_form_no_circle() {
    let mut hits = Vec::new();
    let mut edges = Graph::new();
    for (rel, code) in sources() {
        let top = rel.split(['/', '.']).next().unwrap_or_default().to_string();
        if (code.contains("crate::app") || code.contains("super::app"))
            && top != "app"
            && top != "main"
        {
            hits.push(format!("src/{rel} imports app"));
        }
        for part in code.split("crate::").skip(1) {
            let dep: String = part
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !dep.is_empty() && dep != top && dep.chars().next().is_some_and(char::is_lowercase) {
                edges.entry(top.clone()).or_default().insert(dep);
            }
        }
    }
    let circles = circles(&edges);
    hits.extend(circles.into_iter().map(|c| format!("circle: {c}")));
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

/// No file below `src/` is over 600 lines (a file of tests counts on its own; issue 12).
/// The code lines of `text`: neither blank nor only a comment (`//`, `///`, `//!`).
fn code_lines(text: &str) -> usize {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

/// No file below `src/` holds more than 800 lines of code (comments and blank lines do not
/// count: a file is cut along its concepts, never by trimming what explains it); over 600 is
/// named on stderr as the next to cut (issue 30).
#[test]
fn no_source_file_is_over_800_lines_of_code() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut long = Vec::new();
    for f in &files {
        let n = code_lines(&std::fs::read_to_string(f).expect("read"));
        if n > 800 {
            long.push(format!("{}: {n} lines of code", f.display()));
        } else if n > 600 {
            eprintln!(
                "warning: {}: {n} lines of code (cut it along a seam before 800)",
                f.display()
            );
        }
    }
    assert!(
        long.is_empty(),
        "split along the seams:\n{}",
        long.join("\n")
    );
    assert_eq!(code_lines("// a\n\n//! b\nfn x() {} // c\n    /// d\n"), 1);
}

/// `run/` is crate-private: nothing of it is the library's interface but what `lib.rs`
/// re-exports by name.
#[test]
fn run_is_crate_private() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("lib.rs");
    assert!(
        lib.contains("\npub(crate) mod run;\n"),
        "src/lib.rs must say `pub(crate) mod run;`"
    );
}

#[test]
fn the_test_stripper_drops_test_modules_and_keeps_the_rest() {
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn t() { x() }\n}\nfn b() {}\n#[cfg(test)]\nmod more;\nfn c() {}\n";
    assert_eq!(without_tests(text), "fn a() {}\nfn b() {}\nfn c() {}\n");
}

#[test]
fn the_circle_finder_sees_a_planted_circle_and_passes_a_tree() {
    let graph = |pairs: &[(&str, &str)]| {
        let mut g = Graph::new();
        for (a, b) in pairs {
            g.entry((*a).to_string())
                .or_default()
                .insert((*b).to_string());
        }
        g
    };
    assert!(circles(&graph(&[("app", "run"), ("run", "spec"), ("app", "spec")])).is_empty());
    let found = circles(&graph(&[("host", "run"), ("run", "host"), ("app", "run")]));
    assert_eq!(found, vec!["run -> host -> run".to_string()]);
}

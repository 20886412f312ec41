//! `app/` is verbs and services (issue 30): one file per verb (`*_cmd.rs`, `agent_wait.rs`,
//! `kube_run.rs`, with their own folders), and what several verbs share lives in a service
//! module beside them (`current_run`, `schedule`, `pool_ops`, `launch`, `installer`, …). No
//! verb imports another verb.

use std::path::Path;

use super::{rust_files, without_tests};

/// The verb a file below `src/app/` belongs to (`install_cmd` for `install_cmd/docs.rs`),
/// `None` for a service module.
fn verb_of(rel: &str) -> Option<String> {
    let first = rel.split('/').next().unwrap_or_default();
    let module = first.trim_end_matches(".rs");
    (module.ends_with("_cmd") || matches!(module, "agent_wait" | "kube_run"))
        .then(|| module.to_string())
}

/// Every verb module another verb's `code` names, besides `own`.
fn verbs_named(code: &str, own: &str) -> Vec<String> {
    let mut named = Vec::new();
    for prefix in ["super::", "crate::app::"] {
        for (i, _) in code.match_indices(prefix) {
            let rest = &code[i + prefix.len()..];
            let rest = rest.trim_start_matches("super::");
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if verb_of(&format!("{name}.rs")).is_some() && name != own && !named.contains(&name) {
                named.push(name);
            }
        }
    }
    named
}

#[test]
fn no_verb_imports_another() {
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/app");
    let mut files = Vec::new();
    rust_files(&app, &mut files);
    let mut hits = Vec::new();
    let mut verbs = 0;
    for f in &files {
        let rel = f
            .strip_prefix(&app)
            .expect("below app")
            .display()
            .to_string();
        let Some(own) = verb_of(&rel) else { continue };
        verbs += 1;
        let code = without_tests(&std::fs::read_to_string(f).expect("read"));
        let code: String = code
            .lines()
            .map(|l| l.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        for other in verbs_named(&code, &own) {
            hits.push(format!(
                "src/app/{rel} (verb {own}) imports the verb {other}"
            ));
        }
    }
    assert!(verbs >= 20, "only {verbs} verb files found");
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn the_verb_guard_sees_a_planted_import() {
    assert_eq!(
        verbs_named(
            "use super::status_cmd::current_run; use super::tenant::x;",
            "logs_cmd"
        ),
        ["status_cmd"]
    );
    assert_eq!(
        verbs_named("super::super::init_cmd::schema_path", "install_cmd"),
        ["init_cmd"]
    );
    assert!(verbs_named("use super::pool_ops::claim;", "run_cmd").is_empty());
    assert_eq!(verb_of("pool_cmd/keep.rs").as_deref(), Some("pool_cmd"));
    assert_eq!(verb_of("launch.rs"), None);
}

use std::collections::BTreeSet;

use super::*;
use crate::spec::sections::top;

/// Every table reachable from the top level, with its key path.
fn tables() -> Vec<(String, &'static [Key])> {
    let mut out = vec![(String::new(), top::KEYS)];
    let mut i = 0;
    while let Some((path, keys)) = out.get(i).cloned() {
        for k in keys {
            if let Kind::Map(inner) | Kind::MapList(inner) = k.kind {
                let p = if path.is_empty() {
                    k.name.to_owned()
                } else {
                    format!("{path}.{}", k.name)
                };
                out.push((p, inner));
            }
        }
        i += 1;
    }
    out
}

#[test]
fn every_table_has_unique_documented_keys() {
    let tables = tables();
    let paths: Vec<&str> = tables.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "",
            "repo",
            "task",
            "agent",
            "gate",
            "egress",
            "mounts",
            "services",
            "schedule",
            "delivery",
            "baseline",
            "notify",
            "pool",
            "agent.build",
            "agent.resources",
            "agent.credentials",
            "gate.build",
            "services.build",
            "services.health",
            "agent.credentials.budget",
        ]
    );
    for (path, keys) in tables {
        let unique: BTreeSet<&str> = keys.iter().map(|k| k.name).collect();
        assert_eq!(unique.len(), keys.len(), "duplicate key in `{path}`");
        for k in keys {
            assert!(!k.doc.is_empty(), "`{path}.{}` has no doc line", k.name);
            assert!(
                k.required || k.example.is_none(),
                "`{path}.{}` is optional but has a missing-key example",
                k.name
            );
        }
    }
}

//! The parser pieces.

use super::scalar::plain_reading;

#[test]
fn plain_reading_classifies_yaml_11_and_12_scalars() {
    for s in [
        "acme",
        "main",
        "2G",
        "30m",
        "pypi.org",
        "1.2.3.4",
        "0177.0.0.1",
        "feature/x",
        "v1.2",
        "1-2",
        "*.x.org",
        "-q",
        "e3",
        "_1",
        "0x",
        "12:60",
        "2024-13",
    ] {
        assert_eq!(plain_reading(s), None, "{s}");
    }
    for (s, kind) in [
        ("no", "boolean"),
        ("NO", "boolean"),
        ("On", "boolean"),
        ("~", "null"),
        ("12", "integer"),
        ("-12", "integer"),
        ("+12", "integer"),
        ("0o17", "integer"),
        ("0b101", "integer"),
        ("1.5", "float"),
        (".5", "float"),
        ("5.", "float"),
        ("1e3", "float"),
        ("-1E-3", "float"),
        ("-.inf", "float"),
        (".NaN", "float"),
        ("1:20:30", "integer"),
        ("1:20.5", "float"),
        ("2024-1-1", "date"),
        ("2024-01-01T02:00:00Z", "date"),
        ("2024-01-01 02:00:00", "date"),
    ] {
        assert_eq!(plain_reading(s).map(|r| r.0), Some(kind), "{s}");
    }
}

/// Issue 18, item 8: `timeout: 0` and `memory: 0` show the value they were read as.
#[test]
fn zero_and_negative_integers_show_their_reading() {
    assert_eq!(plain_reading("0"), Some(("integer", "YAML", "0".into())));
    assert_eq!(plain_reading("-5"), Some(("integer", "YAML", "-5".into())));
    assert_eq!(
        plain_reading("0012"),
        Some(("integer", "YAML 1.1", "octal 10".into()))
    );
    let text = "tenant: z\nrepo: { path: /srv/z, base: main }\ntask: { text: x }\nagent:\n  image: localhost/a\n  unpinned_local_image: true\n  command: [a]\n  timeout: 0\n  resources: { memory: 0 }\ngate:\n  image: localhost/a\n  unpinned_local_image: true\n  command: [a]\n";
    let ctx = crate::spec::SpecContext {
        file: "z.yaml".into(),
        home: "/home/u".into(),
        runtime_dir: "/run/user/1000".into(),
    };
    let err = crate::spec::parse(text, &ctx)
        .expect_err("zeros")
        .to_string();
    assert!(
        err.contains("z.yaml:8:12: agent.timeout: expected a string, found integer `0` (YAML would read it as 0)"),
        "{err}"
    );
    assert!(
        err.contains(
            "agent.resources.memory: expected a string, found integer `0` (YAML would read it as 0)"
        ),
        "{err}"
    );
}

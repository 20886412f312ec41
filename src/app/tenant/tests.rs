use crate::spec::SpecContext;

fn spec(extra_agent: &str) -> crate::spec::Spec {
    let yaml = format!(
        "tenant: acme\nrepo: {{path: /home/t/src/acme, base: main}}\ntask: {{text: fix it}}\n\
         agent: {{image: localhost/a, unpinned_local_image: true, command: [agent]{extra_agent}}}\n\
         gate: {{image: localhost/a, unpinned_local_image: true, command: [check]}}\n"
    );
    let ctx = SpecContext {
        file: "/home/t/.config/cyclix/tenants/acme.yaml".into(),
        home: "/home/t".into(),
        runtime_dir: "/run/user/1000".into(),
    };
    crate::spec::parse(&yaml, &ctx).expect("spec")
}

#[test]
fn a_variable_set_nowhere_names_the_spec_file_and_key() {
    let name = "UNIT_TEST_SET_NOWHERE_8Q2";
    assert!(std::env::var_os(name).is_none());
    let s = spec(&format!(", env: [{name}]"));
    let err = super::secret_values(&s, "acme", &[]).expect_err("unset");
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with(&format!(
            "/home/t/.config/cyclix/tenants/acme.yaml: agent.env names `{name}` but it is not set"
        )),
        "{msg}"
    );
    // Positive control: set in the tenant's env file, it is found.
    let vars = vec![(name.to_string(), b"v".to_vec())];
    let found = super::secret_values(&s, "acme", &vars).expect("set in the file");
    assert_eq!(found, vars);
}

//! `agent.build`, `gate.build`, `services[].build` (issue 15, item 1).

use super::*;
use crate::spec::Image;

#[test]
fn a_build_replaces_image_gets_its_tag_and_makes_its_containerfile_a_setup_path() {
    let s = ok(&with(
        &format!("  image: ghcr.io/acme/gate@sha256:{DIGEST}\n"),
        "  build:\n    containerfile: ci/Containerfile\n    context: app/\n    args: { NODE_ENV: test, A: \"1\" }\n    egress: [registry.npmjs.org]\n",
    ));
    let Image::Build { reference, build } = &s.gate.image else {
        panic!("not a build: {:?}", s.gate.image);
    };
    assert_eq!(reference, "localhost/cyclix-build-acme-gate");
    assert_eq!(build.role, "gate");
    assert_eq!(build.context, "app");
    assert_eq!(
        build.args,
        [("A".into(), "1".into()), ("NODE_ENV".into(), "test".into())]
    );
    assert_eq!(build.egress.len(), 1);
    assert_eq!(s.setup, ["ci/Containerfile"]);
    let s = ok(&plus(
        "services:\n  - name: app\n    build: { containerfile: Containerfile }\n",
    ));
    assert_eq!(
        s.services[0].image.reference(),
        "localhost/cyclix-build-acme-service-app"
    );
    assert_eq!(
        s.services[0].image.build().map(|b| b.context.as_str()),
        Some(".")
    );
}

#[test]
fn image_and_build_together_or_neither_and_bad_build_keys_are_refused() {
    let both = with(
        "  command: [make, test]\n",
        "  command: [make, test]\n  build: { containerfile: Containerfile }\n",
    );
    assert_eq!(
        one(&both),
        d(11, 10, "gate.image", "both `image` and `build` are set")
    );
    let neither = with(&format!("  image: ghcr.io/acme/gate@sha256:{DIGEST}\n"), "");
    let e = err(&neither);
    assert!(
        e.to_string().contains("missing required key `image`"),
        "{e}"
    );
    assert!(e.to_string().contains("`build:"), "{e}");
    let bad = |build: &str| {
        err(&with(
            &format!("  image: ghcr.io/acme/gate@sha256:{DIGEST}\n"),
            &format!("  build: {build}\n"),
        ))
        .to_string()
    };
    assert!(bad("{ containerfile: ../x }").contains("`..`"));
    assert!(bad("{ containerfile: /etc/x }").contains("absolute"));
    assert!(bad("{ containerfile: C, context: .git }").contains("`.git`"));
    assert!(bad("{ containerfile: C, args: { HTTPS_PROXY: x } }").contains("set by cyclix"));
    assert!(bad("{ containerfile: C, args: { 1A: x } }").contains("build arg `1A`"));
    assert!(bad("{ containerfile: C, args: [a] }").contains("expected a mapping"));
    assert!(bad("{ containerfile: C, egress: [\"*\"] }").contains("invalid build egress entry"));
    assert!(bad("{ context: . }").contains("missing required key `containerfile`"));
    let e = err(&with(
        &format!("  image: ghcr.io/acme/gate@sha256:{DIGEST}\n"),
        "  unpinned_local_image: true\n  build: { containerfile: C }\n",
    ));
    assert!(e.to_string().contains("no meaning with `build`"), "{e}");
}

#[test]
fn a_devcontainer_build_takes_no_context_or_args_and_is_a_setup_path() {
    let gate = format!("  image: ghcr.io/acme/gate@sha256:{DIGEST}\n");
    let s = ok(&with(
        &gate,
        "  build: { devcontainer: .devcontainer/devcontainer.json }\n",
    ));
    let b = s.gate.image.build().expect("build");
    assert_eq!(
        b.devcontainer.as_deref(),
        Some(".devcontainer/devcontainer.json")
    );
    assert_eq!(s.setup, [".devcontainer/devcontainer.json"]);
    let e = err(&with(
        &gate,
        "  build: { devcontainer: d.json, args: { A: b } }\n",
    ));
    assert!(
        e.to_string().contains("come from the devcontainer.json"),
        "{e}"
    );
    let e = err(&with(
        &gate,
        "  build: { devcontainer: d.json, containerfile: C }\n",
    ));
    assert!(
        e.to_string()
            .contains("both `containerfile` and `devcontainer`"),
        "{e}"
    );
}

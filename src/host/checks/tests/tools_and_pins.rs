//! The `host-tools` check and how `images:T` names what is pinned.

use super::*;

#[test]
fn pinned_lists_the_specs_images_and_names_the_proxy_apart() {
    // Newcomer trial 7, item 15: the proxy is cyclix's own build, not pinned by a digest.
    let f = good();
    let c = checks(&f, &CheckOptions::default());
    let images = c
        .iter()
        .find(|c| c.id == "images:acme")
        .expect("images:acme");
    assert_eq!(images.status, Status::Pass, "{images:?}");
    let (pinned, proxy) = images
        .found
        .split_once("; the proxy is cyclix's own build (")
        .unwrap_or_else(|| panic!("the proxy is named apart: {images:?}"));
    assert!(pinned.contains(PINNED), "{images:?}");
    assert!(!pinned.contains(crate::images::PROXY_IMAGE), "{images:?}");
    assert!(proxy.contains(crate::images::PROXY_IMAGE), "{images:?}");
}

#[test]
fn a_missing_host_tool_fails_with_its_package() {
    let mut f = good();
    let ok = checks(&f, &CheckOptions::default());
    let row = ok
        .iter()
        .find(|c| c.id == "host-tools")
        .expect("host-tools");
    assert_eq!(row.status, Status::Pass, "{row:?}");
    assert!(row.found.contains("nsenter /usr/bin/nsenter"), "{row:?}");
    for t in &mut f.host_tools {
        if t.0 == "setpriv" {
            t.1 = None;
        }
    }
    let c = checks(&f, &CheckOptions::default());
    let row = c.iter().find(|c| c.id == "host-tools").expect("host-tools");
    assert_eq!(row.status, Status::Fail, "{row:?}");
    assert!(row.found.starts_with("not on $PATH: setpriv ("), "{row:?}");
    assert!(
        row.fix.as_deref().is_some_and(|f| f.contains("util-linux")),
        "{row:?}"
    );
}

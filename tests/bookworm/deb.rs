//! The Debian package on the bookworm testbed (issue 32, item 6): built by `scripts/deb` (lintian
//! runs in the trixie suite's `e2e_deb`; the files are the same), installed with
//! `apt install ./cyclix_….deb` on Debian 12 (podman 4.3.1, slirp4netns: the `passt |
//! slirp4netns` alternative), and the demo passes from it with the plain backend. The package
//! is removed afterwards ([`crate::common::deb`]).

use crate::common::deb;
use crate::common::testbed::Testbed;

#[test]
fn the_package_installs_with_apt_on_bookworm_and_the_demo_passes_from_it() {
    let _only = crate::common::testbed::exclusive();
    let tb = Testbed::get();
    let built = deb::build("bookworm", false);
    let _installed = deb::install(tb, &built);
    let rec = deb::demo_passes(tb);
    assert!(
        rec["probes"]
            .as_array()
            .is_some_and(|p| p.len() >= 40 && p.iter().all(|p| p["verdict"] == "PASS")),
        "every probe passed: {rec:#}"
    );
}

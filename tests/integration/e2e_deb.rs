//! The Debian package on the trixie testbed (issue 32, item 6): `scripts/deb` builds it (with
//! lintian: no error, no warning), `apt install ./cyclix_….deb` installs it, and the demo
//! passes from it: `/usr/bin/cyclix`, the units of `/usr/lib/systemd/user`, `cyclix install`
//! writing none of the package's files for the user. The package is removed afterwards
//! ([`crate::common::deb`]; the bookworm testbed runs the same in `tests/bookworm/deb.rs`).

use crate::common::deb;
use crate::common::testbed::Testbed;

#[test]
fn the_package_installs_with_apt_and_the_demo_passes_from_it() {
    let _only = crate::common::testbed::exclusive();
    let tb = Testbed::get();
    let built = deb::build("trixie", true);
    let _installed = deb::install(tb, &built);
    deb::demo_passes(tb);
}

//! `host_units`'s unit tests.

use super::cpu_quota;

#[test]
fn cpu_limits_become_cpu_quota_percentages() {
    assert_eq!(cpu_quota(1500), "150%");
    assert_eq!(cpu_quota(250), "25%");
    assert_eq!(cpu_quota(15), "1.5%");
    assert_eq!(cpu_quota(10), "1%");
}

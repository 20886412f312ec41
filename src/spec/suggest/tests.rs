use super::*;

#[test]
fn nearest_key_suggestions() {
    let keys = [
        "tenant",
        "repo",
        "egress",
        "network",
        "on_calendar",
        "command",
    ];
    assert_eq!(nearest("netwrok", &keys), Some("network"));
    assert_eq!(nearest("egres", &keys), Some("egress"));
    assert_eq!(nearest("Tenant", &keys), Some("tenant"));
    assert_eq!(nearest("oncalendar", &keys), Some("on_calendar"));
    assert_eq!(nearest("cap_add", &keys), None);
    assert_eq!(osa_distance("ab", "ba"), 1);
    assert_eq!(osa_distance("", "abc"), 3);
}

//! The fixture project of issue 15's "Done when": a shop web app in Perl (not the demo's
//! Python) with its own Containerfile and a `PostgreSQL` database, end to end. The agent's, the
//! gate's and the app's images are built from the Containerfile at the base commit; the app
//! runs from the work tree on a port cyclix picked, its database on another; the baseline asks
//! the app for its total before the agent starts; the agent (script preset) sees the wrong
//! total through the app's API, fixes the code, sees the right one through the API (the app
//! runs the tree live), commits; the gate (no network) checks the code; the branch is delivered.

use crate::common::run::{leftovers, prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

/// The project's image: Debian with Perl, the `PostgreSQL` client, curl and git (all local in
/// the testbed: nothing is installed, so nothing is fetched).
const CONTAINERFILE: &str = r"FROM docker.io/library/debian:trixie
RUN command -v perl && command -v psql && command -v curl && command -v git \
    && git config --system user.name shop-agent && git config --system user.email agent@shop.invalid \
    && git config --system --add safe.directory '*'
ENV HOME=/tmp
WORKDIR /work
";

/// The HTTP server: reloads `app/shop.pl` for every request, so it serves the tree as it is.
const SERVER: &str = r#"use strict; use warnings; use IO::Socket::INET;
my $srv = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $ENV{CYCLIX_PORT}, Listen => 8, ReuseAddr => 1) or die "listen: $!";
while (my $c = $srv->accept) {
    my $req = <$c>; my (undef, $path) = split ' ', ($req // '');
    while (my $l = <$c>) { last if $l =~ /^\r?\n$/ }
    our ($code, $body) = (500, "error\n");
    eval { do "/work/app/shop.pl" or die($@ || $!); ($code, $body) = main::handle($path // '/'); 1 } or $body = "$@";
    print $c "HTTP/1.0 $code X\r\nContent-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body";
    close $c;
}
"#;

/// The shop: its total leaves out the first item (the bug).
const SHOP: &str = r#"sub total { my $t = 0; for my $i (1 .. $#_) { $t += $_[$i] } return $t }
sub psql { my ($sql) = @_; my $p = $ENV{CYCLIX_SERVICE_DB_PORT}; my $d = $ENV{CYCLIX_SERVICE_DB_DATABASE};
    my @out = `psql -h 127.0.0.1 -p $p -U postgres -d $d -tAq -v ON_ERROR_STOP=1 -c "$sql"`; die "psql failed\n" if $?; chomp @out; return @out }
sub prices {
    psql("create table if not exists items (id serial primary key, price int not null)");
    psql("insert into items (price) select * from (values (10), (20), (30)) v where not exists (select 1 from items)");
    return psql("select price from items order by id");
}
sub handle { my ($path) = @_;
    return (200, "ok\n") if $path eq '/health';
    return (200, total(prices()) . "\n") if $path eq '/total';
    return (404, "no such page\n");
}
1;
"#;

/// The agent: asks the API, fixes the loop, asks again, commits the fix and the evidence.
const AGENT: &str = r#"set -eu
api() { curl -fsS --noproxy '*' "http://$CYCLIX_SERVICE_APP$1"; }
before=$(api /total)
sed -i 's/for my \$i (1 \.\. \$#_)/for my $i (0 .. $#_)/' app/shop.pl
after=$(api /total)
printf 'before=%s after=%s\n' "$before" "$after" > api-evidence.txt
[ "$after" = 60 ]
git add app/shop.pl api-evidence.txt
git commit -qm "shop: the total counts every item"
"#;

const SERVICES: &str = "  - name: db
    image: localhost/cyclix-postgres:latest
    unpinned_local_image: true
    data: /var/lib/postgresql/data
    health:
      command: [sh, -c, \"pg_isready -q -h 127.0.0.1 -p \\\"${PGPORT}\\\"\"]
      interval: 1s
      retries: 60
  - name: app
    build: { containerfile: Containerfile }
    worktree: read_only
    command: [perl, app/server.pl]
    health:
      command: [sh, -c, \"curl -fsS --noproxy '*' http://127.0.0.1:${CYCLIX_PORT}/health\"]
      interval: 1s
      retries: 60";

#[test]
fn a_perl_shop_with_its_own_containerfile_and_postgres_is_fixed_through_its_api_and_delivered() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-shop")
        .file("Containerfile", CONTAINERFILE)
        .file("app/server.pl", SERVER)
        .file("app/shop.pl", SHOP)
        .file("agent.sh", AGENT)
        .task("\"The shop's /total is wrong: fix it.\"")
        .agent_build("{ containerfile: Containerfile }")
        .agent_cmd("[sh, /work/agent.sh]")
        .gate_build("{ containerfile: Containerfile }")
        .gate_cmd(r#"[perl, -e, 'do "./app/shop.pl" or die; my $t = total(10, 20, 30); print "total=$t\n"; exit($t == 60 ? 0 : 1)']"#)
        .gate_timeout("1m")
        .services(SERVICES)
        .extra_yaml("baseline:\n  command: [sh, -c, 'curl -fsS --noproxy \"*\" \"http://$CYCLIX_SERVICE_APP/total\"']\n  timeout: 1m")
        .extra_yaml("delivery:\n  remote: deliver")
        .write(tb);
    expect_success(
        &tb.user_sh(&format!(
            "set -e; rm -rf ~/{t}-remote.git; git init -q --bare ~/{t}-remote.git; git -C ~/src/{t} remote add deliver ~/{t}-remote.git"
        )),
        "a local bare remote",
    );
    let _ = start(tb, &t);
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "passed", "{rec:#}");
    let roles: Vec<&str> = rec["images"]
        .as_array()
        .expect("images")
        .iter()
        .filter_map(|i| i["role"].as_str())
        .collect();
    assert_eq!(roles, ["agent", "gate", "service-app"], "{rec:#}");
    assert_eq!(rec["baseline"]["exit"], 0, "{rec:#}");
    let ports: Vec<u64> = rec["services"]
        .as_array()
        .expect("services")
        .iter()
        .filter_map(|s| s["port"].as_u64())
        .collect();
    assert_eq!(ports.len(), 2, "{rec:#}");
    assert_ne!(ports[0], ports[1], "{rec:#}");
    let branch = rec["branch"].as_str().expect("branch");
    let evidence = expect_success(
        &tb.user_sh(&format!("git -C ~/src/{t} show {branch}:api-evidence.txt")),
        "the agent's evidence",
    );
    // The wrong total through the API, then the right one once the code was fixed.
    assert_eq!(evidence, "before=50 after=60\n", "{rec:#}");
    assert_eq!(rec["delivery"]["outcome"], "pushed", "{rec:#}");
    let delivered = expect_success(
        &tb.user_sh(&format!(
            "git -C ~/{t}-remote.git show {}:app/shop.pl | head -1",
            rec["delivery"]["branch"]
                .as_str()
                .expect("delivered branch")
        )),
        "the delivered fix",
    );
    assert!(delivered.contains("(0 .. $#_)"), "{delivered}");
    let run = rec["run_id"].as_str().expect("run id");
    let left = leftovers(tb, run, &t);
    assert!(left.trim().is_empty(), "left behind by {run}:\n{left}");
}

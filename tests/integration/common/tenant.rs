//! One fluent builder for every tenant spec the integration tests write (in the style of
//! just's `Test` and nextest's fixtures): the demo tenant by default, each call changes one
//! thing, and [`Tenant::yaml`] renders the spec the way the tests have always written it.
//!
//! ```text
//! Tenant::new("e2e-x")
//!     .agent_cmd(r#"[sh, -c, "sleep 3 && exec cyclix-demo-agent"]"#)
//!     .egress_allow(&["allowed.example"], &[80])
//!     .write(tb);
//! ```
//!
//! [`Tenant::write`] clones the demo project to `~/src/NAME` inside the testbed, commits the
//! [`Tenant::file`]s on `main` and writes `~/.config/cyclix/tenants/NAME.yaml`.

use crate::common::testbed::{Testbed, expect_success};

/// Claims tenant `name` for the calling test (libtest names each test's thread after it):
/// two tests writing one tenant race on its repository and spec, since [`Tenant::write`]
/// removes and re-clones `~/src/NAME` (a run of `e2e-poolkill` once lost its agent's file to
/// another test's write of that name beside it).
///
/// # Panics
/// If another test of this process wrote a tenant of this name.
fn own_name(name: &str) {
    use std::collections::BTreeMap;
    use std::sync::{Mutex, PoisonError};
    static OWNERS: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
    let me = std::thread::current().name().unwrap_or("main").to_string();
    let mut owners = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(other) = owners.get(name).filter(|o| **o != me) {
        panic!(
            "tenant {name} is written by test {other} too: tests running side by side share its \
             repository and spec; give this test's tenant a name of its own"
        );
    }
    owners.insert(name.to_string(), me);
}

/// The image of the demo agent and gate.
const DEMO_IMAGE: &str = "localhost/cyclix-agent-python:latest";

/// A tenant spec under construction; see the module documentation.
#[must_use]
pub struct Tenant {
    name: String,
    /// The `task.text` scalar as written (quotes included).
    task: String,
    /// Both the agent's and the gate's image.
    image: String,
    /// Whether `unpinned_local_image: true` is left out (an image pinned by digest).
    pinned: bool,
    /// Whether the agent and gate carry `timeout:` keys.
    timeouts: bool,
    agent_cmd: String,
    /// More `agent:` keys, one line each (`env: [X]`), after `command`.
    agent_keys: Vec<String>,
    gate_cmd: String,
    gate_quick: Option<String>,
    /// More `gate:` keys, one line each (`protected: [tests/]`), after `quick`.
    gate_keys: Vec<String>,
    gate_timeout: String,
    /// Top-level blocks after `gate:`, in call order.
    extra: Vec<String>,
    /// Files (path in the repository, contents) committed on `main` before the run.
    files: Vec<(String, String)>,
    /// `agent.preset`; with it the agent's `image` and `command` are left to the preset
    /// unless [`Tenant::image`]/[`Tenant::agent_cmd`] override them (`preset_override`).
    preset: Option<String>,
    /// Whether the agent keeps its `image` and `command` keys under a preset.
    preset_override: bool,
    /// `agent.build`, a YAML flow mapping, instead of the agent's `image` (issue 15).
    agent_build: Option<String>,
    /// `gate.build`, likewise.
    gate_build: Option<String>,
}

impl Tenant {
    /// The demo tenant `name`: the demo project's repository, the scripted demo agent, the
    /// pytest gate, 2 minute timeouts.
    pub fn new(name: &str) -> Self {
        Tenant {
            name: name.to_string(),
            task: "\"Fix the failing test.\"".to_string(),
            image: DEMO_IMAGE.to_string(),
            pinned: false,
            timeouts: true,
            agent_cmd: "[cyclix-demo-agent]".to_string(),
            agent_keys: Vec::new(),
            gate_cmd: r#"[python3, -m, pytest, -q, -p, "no:cacheprovider"]"#.to_string(),
            gate_quick: None,
            gate_keys: Vec::new(),
            gate_timeout: "2m".to_string(),
            extra: Vec::new(),
            files: Vec::new(),
            preset: None,
            preset_override: false,
            agent_build: None,
            gate_build: None,
        }
    }

    /// `gate.build: BUILD` (a YAML flow mapping) instead of the gate's `image`.
    pub fn gate_build(mut self, build: &str) -> Self {
        self.gate_build = Some(build.to_string());
        self
    }

    /// `agent.build: BUILD` (a YAML flow mapping) instead of the agent's `image`.
    pub fn agent_build(mut self, build: &str) -> Self {
        self.agent_build = Some(build.to_string());
        self
    }

    /// `agent.preset: NAME`: the preset supplies the agent's image and command.
    pub fn preset(mut self, name: &str) -> Self {
        self.preset = Some(name.to_string());
        self
    }

    /// `agent.preset: NAME` with the demo image and [`Tenant::agent_cmd`] as overrides (the
    /// preset's uid, variables, credential and parser still apply).
    pub fn preset_overridden(mut self, name: &str) -> Self {
        self.preset = Some(name.to_string());
        self.preset_override = true;
        self
    }

    /// The task text, a YAML scalar as written (`hi`, `"Fix it."`).
    pub fn task(mut self, text: &str) -> Self {
        self.task = text.to_string();
        self
    }

    /// The image of both the agent and the gate.
    pub fn image(mut self, image: &str) -> Self {
        self.image = image.to_string();
        self
    }

    /// Leaves out `unpinned_local_image: true` (for an image pinned by digest).
    pub fn pinned(mut self) -> Self {
        self.pinned = true;
        self
    }

    /// Leaves out the agent's and the gate's `timeout:` keys.
    pub fn no_timeouts(mut self) -> Self {
        self.timeouts = false;
        self
    }

    /// The agent's `command`, a YAML flow list.
    pub fn agent_cmd(mut self, command: &str) -> Self {
        self.agent_cmd = command.to_string();
        self
    }

    /// One more `agent:` key, as its line (`env: [E2E_TOKEN]`, `resources: { memory: 64M }`).
    pub fn agent_key(mut self, line: &str) -> Self {
        self.agent_keys.push(line.to_string());
        self
    }

    /// The gate's `command`, a YAML flow list.
    pub fn gate_cmd(mut self, command: &str) -> Self {
        self.gate_cmd = command.to_string();
        self
    }

    /// The gate's quick suite (`gate.quick`), a YAML flow list.
    pub fn gate_quick(mut self, command: &str) -> Self {
        self.gate_quick = Some(command.to_string());
        self
    }

    /// One more `gate:` key, as its line (`protected: [tests/]`).
    pub fn gate_key(mut self, line: &str) -> Self {
        self.gate_keys.push(line.to_string());
        self
    }

    /// The gate's timeout (`1m`); 2 minutes unless set.
    pub fn gate_timeout(mut self, timeout: &str) -> Self {
        self.gate_timeout = timeout.to_string();
        self
    }

    /// `tier: TIER`.
    pub fn tier(self, tier: &str) -> Self {
        self.extra_yaml(&format!("tier: {tier}"))
    }

    /// `egress:` allowing `hosts` on `ports`.
    pub fn egress_allow(self, hosts: &[&str], ports: &[u16]) -> Self {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        self.extra_yaml(&format!(
            "egress:\n  allow: [{}]\n  ports: [{}]",
            hosts.join(", "),
            ports.join(", ")
        ))
    }

    /// `services:` with `list`, the YAML of its entries (`  - name: db\n    image: ...`).
    pub fn services(self, list: &str) -> Self {
        self.extra_yaml(&format!("services:\n{list}"))
    }

    /// A top-level YAML block of its own (`delivery:\n  remote: deliver`), after the others.
    pub fn extra_yaml(mut self, block: &str) -> Self {
        self.extra.push(block.to_string());
        self
    }

    /// A file (`path` in the repository, `text` ending in a newline) committed on `main`.
    pub fn file(mut self, path: &str, text: &str) -> Self {
        self.files.push((path.to_string(), text.to_string()));
        self
    }

    /// The spec, ending in a newline.
    #[must_use]
    pub fn yaml(&self) -> String {
        let Tenant { name, image, .. } = self;
        let unpinned = if self.pinned {
            ""
        } else {
            "  unpinned_local_image: true\n"
        };
        let timeout = |t: &str| {
            if self.timeouts {
                format!("  timeout: {t}\n")
            } else {
                String::new()
            }
        };
        let mut s = format!(
            "tenant: {name}\nrepo: {{ path: ~/src/{name}, base: main }}\ntask: {{ text: {} }}\nagent:\n",
            self.task
        );
        if let Some(p) = &self.preset {
            s.push_str(&format!("  preset: {p}\n"));
        }
        if let Some(b) = &self.agent_build {
            s.push_str(&format!("  build: {b}\n  command: {}\n", self.agent_cmd));
        } else if self.preset.is_none() || self.preset_override {
            s.push_str(&format!(
                "  image: {image}\n{unpinned}  command: {}\n",
                self.agent_cmd
            ));
        }
        for line in &self.agent_keys {
            s.push_str(&format!("  {line}\n"));
        }
        s.push_str(&timeout("2m"));
        match &self.gate_build {
            Some(b) => s.push_str(&format!(
                "gate:\n  build: {b}\n  command: {}\n",
                self.gate_cmd
            )),
            None => s.push_str(&format!(
                "gate:\n  image: {image}\n{unpinned}  command: {}\n",
                self.gate_cmd
            )),
        }
        if let Some(quick) = &self.gate_quick {
            s.push_str(&format!("  quick: {quick}\n"));
        }
        for line in &self.gate_keys {
            s.push_str(&format!("  {line}\n"));
        }
        s.push_str(&timeout(&self.gate_timeout));
        s.push_str(&self.extra.join("\n"));
        s.push('\n');
        s
    }

    /// Creates the tenant inside the testbed: `~/src/NAME` a fresh clone of the demo project
    /// (with the [`Tenant::file`]s committed on `main`), the spec at
    /// `~/.config/cyclix/tenants/NAME.yaml`. Returns the name.
    ///
    /// # Panics
    /// If the script fails, or another test wrote a tenant of this name ([`own_name`]).
    pub fn write(&self, tb: &Testbed) -> String {
        let name = &self.name;
        own_name(name);
        let mut script = format!(
            "set -e\nrm -rf ~/src/{name}; mkdir -p ~/src ~/.config/cyclix/tenants\n\
             git clone -q ~/.local/share/cyclix/demo/project ~/src/{name}\n"
        );
        for (path, text) in &self.files {
            script.push_str(&format!(
                "mkdir -p \"$(dirname ~/src/{name}/{path})\"\ncat > ~/src/{name}/{path} <<'FILE'\n{text}FILE\n\
                 git -C ~/src/{name} add {path}\n"
            ));
        }
        if !self.files.is_empty() {
            script.push_str(&format!(
                "git -C ~/src/{name} -c user.name=t -c user.email=t@example.com commit -q -m fixture\n"
            ));
        }
        script.push_str(&format!(
            "cat > ~/.config/cyclix/tenants/{name}.yaml <<'SPEC'\n{}SPEC\n",
            self.yaml()
        ));
        expect_success(&tb.user_sh(&script), &format!("create tenant {name}"));
        name.clone()
    }
}

/// Writes tenant `t`'s env file inside the testbed (mode 0600) with `var` set to a random
/// `sk-real-…` value: the real key of a credential, which never leaves the testbed (tests find
/// it with `sed -n 's/^VAR=//p'` into a needle file, never in an argv).
///
/// # Panics
/// If the script fails.
pub fn key_file(tb: &Testbed, t: &str, var: &str) {
    expect_success(
        &tb.user_sh(&format!(
            "set -e; mkdir -p ~/.config/cyclix/tenants; umask 077
             printf '{var}=sk-real-%s\\n' \"$(head -c 18 /dev/urandom | base64 | tr -d '/+=')\" > ~/.config/cyclix/tenants/{t}.env"
        )),
        "make the key",
    );
}

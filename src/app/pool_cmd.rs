//! `cyclix pool fill|keep|expire TENANT` (issue 16): a tenant's warm pool filled once, kept
//! filled ([`keep`], the keeper `cyclix-pool@TENANT.service` runs), or its idle and dead
//! environments destroyed; the claims and convergence all verbs share are in [`super::pool_ops`].

use std::time::SystemTime;

use anyhow::Result;

use super::clock::{new_run_id, now_ms};
use super::pool_ops::{
    DeadNote, converge_dead_claims_unlocked, converge_dead_fillers, destroy_dead, with_env_host,
};
use super::tenant::{random_log_key, random_placeholders, runnable_spec};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::pool;

pub mod keep;

/// `cyclix pool fill|keep|expire TENANT`.
///
/// # Errors
/// An invalid tenant name, or those of [`fill`], [`keep::keep`], [`expire`].
pub fn dispatch(env: &HostEnv, cmd: &crate::cli::PoolCommand) -> Result<Outcome> {
    use crate::cli::PoolCommand;
    match cmd {
        PoolCommand::Fill { tenant } => {
            super::tenant::check_name(tenant)?;
            fill(env, tenant)
        }
        PoolCommand::Keep { tenant } => {
            super::tenant::check_name(tenant)?;
            keep::keep(env, tenant)
        }
        PoolCommand::Expire {
            tenant,
            all,
            now_ms,
        } => {
            super::tenant::check_name(tenant)?;
            // Every ready one is idle past any `max_idle` at the end of time.
            expire(
                env,
                tenant,
                if *all { Some(u128::MAX / 2) } else { *now_ms },
            )
        }
    }
}

/// `cyclix pool fill TENANT`: converges environments of fillers that died, destroys the ready
/// ones that are dead ([`destroy_dead`]), then fills the pool to its `size` once and exits.
/// Exit 1 when the tenant cannot have a warm pool (the reason is printed), a dead one is not
/// fully destroyed or a fill failed.
///
/// # Errors
/// No runtime dir, the user manager cannot be reached, the state cannot be read.
pub fn fill(env: &HostEnv, tenant: &str) -> Result<Outcome> {
    let Some((spec, backend)) = runnable_spec(env, tenant, None, None, &|_| None)? else {
        return Ok(Outcome::Findings);
    };
    if let Some(why) = pool::why_cold(&spec, backend) {
        crate::stderrln!("error: the pool of tenant {tenant} cannot be filled: {why}");
        return Ok(Outcome::Findings);
    }
    let size = spec.pool.as_ref().map_or(0, |p| p.size) as usize;
    with_env_host(env, &spec, |eh| {
        for n in converge_dead_fillers(eh)? {
            crate::stderrln!("{n}");
        }
        for n in converge_dead_claims_unlocked(env, eh)?.0 {
            crate::stderrln!("{n}");
        }
        let mut ok = true;
        for n in destroy_dead(env, eh)? {
            n.say()?;
            ok &= !matches!(n, DeadNote::Left(_));
        }
        loop {
            let c = eh.state.counts()?;
            if c.ready + c.filling >= size {
                break;
            }
            let id = new_run_id(SystemTime::now(), std::process::id());
            match eh.fill(
                &id,
                &random_log_key()?,
                &random_placeholders(eh.spec)?,
                now_ms,
            ) {
                Ok(f) => crate::outln!(
                    "pool {tenant}: environment {} ready ({} ms)",
                    f.env,
                    f.ready_ms.saturating_sub(f.began_ms)
                ),
                Err(e) => {
                    crate::stderrln!(
                        "error: pool {tenant}: filling environment {id}: {e:#}{}",
                        super::pool_ops::fill_failure_note(env)
                    );
                    ok = false;
                    break;
                }
            }
        }
        Ok(if ok { Outcome::Ok } else { Outcome::Findings })
    })
}

/// `cyclix pool expire TENANT`: destroys every ready environment that is dead
/// ([`destroy_dead`]) or idle past the pool's `max_idle` at `now` (ms since the epoch; default
/// the clock: `--now-ms` is for tests). Exit 1 when one is not fully destroyed.
///
/// # Errors
/// As [`fill`].
pub fn expire(env: &HostEnv, tenant: &str, now: Option<u128>) -> Result<Outcome> {
    let Some((spec, _)) = runnable_spec(env, tenant, None, None, &|_| None)? else {
        return Ok(Outcome::Findings);
    };
    let Some(p) = spec.pool.clone() else {
        crate::stderrln!("error: tenant {tenant} has no pool");
        return Ok(Outcome::Findings);
    };
    let now = now.unwrap_or_else(now_ms);
    with_env_host(env, &spec, |eh| {
        let mut ok = true;
        for n in converge_dead_claims_unlocked(env, eh)?.0 {
            crate::outln!("{n}");
        }
        for n in destroy_dead(env, eh)? {
            n.say()?;
            ok &= !matches!(n, DeadNote::Left(_));
        }
        for f in eh
            .state
            .take_expired(now, u128::from(p.max_idle_s) * 1000)?
        {
            let idle_s = now.saturating_sub(f.ready_ms) / 1000;
            match eh.destroy(&f.env, &eh.state.expiring_path(&f.env)) {
                None => crate::outln!(
                    "pool {tenant}: environment {} expired (idle {idle_s} s) and destroyed",
                    f.env
                ),
                Some(l) => {
                    ok = false;
                    crate::stderrln!("error: pool {tenant}: {l}");
                }
            }
        }
        Ok(if ok { Outcome::Ok } else { Outcome::Findings })
    })
}

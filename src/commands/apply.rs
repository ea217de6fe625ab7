//! `k0sform apply [FILE]`: plan (or take a saved plan), confirm, run the steps, checkpoint the
//! state after each one.

use crate::apply::{self, Cancel, ExecOptions, Remote};
use crate::cli::{ApplyArgs, DestroyArgs, GlobalArgs};
use crate::engine::{self, Failure, Planned};
use crate::exit::Exit;
use crate::ssh::SshTransport;
use crate::ui::render;
use crate::ui::{self, ApplyEvent, EventSink, HumanSink, JsonSink};
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

pub fn run(global: &GlobalArgs, args: &ApplyArgs) -> Exit {
    engine::with_ssh(|transport| async move { apply(global, args, &transport).await })
}

/// `k0sform destroy`: `apply` of a destroy plan, confirmed by typing the cluster's name.
pub fn destroy(global: &GlobalArgs, args: &DestroyArgs) -> Exit {
    let apply_args = ApplyArgs {
        plan_file: None,
        target: args.target_args(),
        destroy: true,
        // k0sctl reset's --force is its confirmation bypass (action/reset.go).
        auto_approve: args.auto_approve || args.force,
        json: args.json,
        kubeconfig_out: None,
        show_secrets: false,
        run: args.run.clone(),
        k0sctl: Default::default(),
    };
    engine::with_ssh(|transport| async move { apply(global, &apply_args, &transport).await })
}

async fn apply(
    global: &GlobalArgs,
    args: &ApplyArgs,
    transport: &SshTransport,
) -> Result<Exit, Failure> {
    let destroy = args.destroy;
    if destroy {
        super::refuse_with_destroy(&args.target)?;
    }
    // A dry run (k0sctl's --dry-run, DRY_RUN) only plans: it never asks.
    let dry_run = args.run.dry_run().map_err(Failure::error)?;
    let asks = !args.auto_approve && !dry_run;
    if destroy && asks && !global.input {
        return Err(Failure::error(
            "destroy needs confirmation but -input=false forbids asking: review `k0sform plan -destroy` and use -auto-approve",
        ));
    }
    if args.plan_file.is_none() && asks && !global.input {
        return Err(Failure::error(
            "apply needs confirmation but -input=false forbids asking: review the plan and use -auto-approve, or apply a saved plan file",
        ));
    }
    if args.show_secrets && args.plan_file.is_some() {
        return Err(Failure::error(
            "-show-secrets cannot be used with a saved plan: it holds no secret values; run apply without a plan file to see them",
        ));
    }
    let started = tokio::time::Instant::now();
    k0sctl_checks(args, dry_run)?;
    // The lock comes first: planning against a state another apply is about to change is useless.
    let (mut loaded, mut ctx) = super::load_inputs(global)?;
    k0sctl_overrides(&mut loaded.spec, &args.k0sctl, &args.run)?;
    // k0sctl's --concurrency (now the spec's limit) or the spec's limit; -parallelism wins.
    let parallelism =
        super::hosts_at_once(args.target.parallelism, &loaded.spec, ctx.state.hosts.len());
    let operation = if destroy { "destroy" } else { "apply" };
    let _lock = ctx.store.lock(operation, global.lock_timeout)?;
    // Re-read under the lock: another run may have written since.
    let fresh = ctx.store.load()?;
    ctx.had_state = fresh.is_some();
    ctx.state = fresh.unwrap_or_default();

    let color = !global.no_color && ui::stdout_color();
    let mut planned = match &args.plan_file {
        Some(file) => {
            let saved = super::show::read_saved(file)?;
            let cli = crate::plan::PlanOptions {
                destroy,
                ..super::plan_options(&args.target)?
            };
            let rederiving =
                engine::rederive_saved(&saved, loaded, ctx, transport, (&cli, parallelism));
            let planned = within_timeout(&args.run, started, rederiving)
                .await?
                .map_err(|e| match e {
                    engine::SavedPlanFailure::Stale(stale) => Failure {
                        exit: Exit::StalePlan,
                        message: format!("{}: {stale}; run `k0sform plan` again", file.display()),
                    },
                    engine::SavedPlanFailure::Other(f) => f,
                })?;
            // What runs is what was derived now (equal to the file's plan, or refused above).
            show_plan(args, &planned.plan, color);
            // A plan file that destroys the cluster is applied only with -destroy (checked when
            // its options were compared) and confirmed like `destroy`: typing the cluster's name,
            // unless -auto-approve.
            if planned.plan.destroy && planned.plan.has_changes() && !args.auto_approve {
                confirm_destroy(global.input, args.json, &planned.plan.cluster_name)?;
            }
            planned
        }
        None => {
            let opts = crate::plan::PlanOptions {
                show_secrets: args.show_secrets,
                destroy,
                ..super::plan_options(&args.target)?
            };
            let planning =
                engine::plan_with(loaded, ctx, transport, (&opts, parallelism), None, None);
            let planned = within_timeout(&args.run, started, planning).await??;
            show_plan(args, &planned.plan, color);
            if dry_run {
                eprintln!("Dry run: nothing was changed.");
                return Ok(Exit::Success);
            }
            if planned.plan.has_changes() && !args.auto_approve {
                if destroy {
                    confirm_destroy(global.input, args.json, &planned.plan.cluster_name)?;
                } else {
                    confirm(global.input, args.json)?;
                }
            }
            planned
        }
    };
    // Known before the intents are settled: where a killed run may have left a join token.
    let interrupted_joins: Vec<_> = planned
        .state
        .state
        .intents
        .iter()
        .filter(|i| i.kind.starts_with("join_"))
        .map(|i| crate::hostid::HostId::new(&i.address, i.port))
        .collect();
    resolve_intents(&mut planned)?;
    for note in engine::settle_leftovers(&planned, transport, &interrupted_joins, parallelism).await
    {
        eprintln!("{}", crate::ui::escape(&note));
    }
    let spec = planned.loaded.spec.clone();
    if planned.plan.destroy && !planned.plan.has_changes() {
        forget_empty_cluster(&mut planned)?;
    }
    let deadline = args.run.deadline().map(|d| (started + d, d));
    let exit = if planned.plan.has_changes() {
        execute(global, args, transport, planned, deadline).await?
    } else {
        Exit::Success
    };
    if let Some(path) = &args.kubeconfig_out
        && exit == Exit::Success
    {
        let refuse = args.target.host_keys.refuse_first_contact();
        let over = crate::kubeconfig::Overrides {
            user: args.k0sctl.kubeconfig_user.clone(),
            cluster: args.k0sctl.kubeconfig_cluster.clone(),
            address: args.k0sctl.kubeconfig_api_address.clone(),
        };
        write_kubeconfig(global, &spec, transport, path, (&over, refuse)).await?;
    }
    Ok(exit)
}

/// Planning under `-timeout` (k0sctl's --timeout, counted from the start of the run): reached
/// there, the run fails before any host changed.
async fn within_timeout<T>(
    run: &crate::cli::RunArgs,
    started: tokio::time::Instant,
    planning: impl std::future::Future<Output = T>,
) -> Result<T, Failure> {
    let Some(d) = run.deadline() else {
        return Ok(planning.await);
    };
    let reached = || {
        Failure::error(format!(
            "-timeout {} reached while planning; no host was changed",
            humantime::format_duration(d)
        ))
    };
    // Already past: planning does not start (tokio's timeout polls the work before its timer,
    // and work that ends on the timer's first turn would win the race).
    if tokio::time::Instant::now() >= started + d {
        return Err(reached());
    }
    tokio::time::timeout_at(started + d, planning)
        .await
        .map_err(|_| reached())
}

/// k0sctl's spellings (cmd/apply.go, cmd/flags.go) that need a word before anything runs: the
/// ones that change the plan cannot change a saved one, `--force` turns nothing off.
fn k0sctl_checks(args: &ApplyArgs, dry_run: bool) -> Result<(), Failure> {
    let k = &args.k0sctl;
    if let Some(file) = &args.plan_file {
        if dry_run {
            return Err(Failure::error(format!(
                "-dry-run with a saved plan: `k0sform show {}` shows it without running it",
                file.display()
            )));
        }
        for (given, flag) in [
            (k.no_wait, "-no-wait"),
            (k.evict_taint.is_some(), "-evict-taint"),
            (k.concurrent_uploads.is_some(), "-concurrent-uploads"),
            (args.run.concurrency.is_some(), "-concurrency"),
        ] {
            if given {
                return Err(Failure::error(format!(
                    "{flag} changes the spec's options, which a saved plan has fixed: set it in the spec and run `k0sform plan -out` again (-parallelism sets how many hosts run at once)"
                )));
            }
        }
    }
    if k.force {
        eprintln!(
            "Note: -force (k0sctl) changes nothing: k0sform always installs with `k0s install --force`, and its safety checks cannot be turned off (a rebuilt host: -replace ADDR; an older version: -allow-downgrade)."
        );
    }
    let kubeconfig_flag = [
        (
            k.kubeconfig_api_address.is_some(),
            "-kubeconfig-api-address",
        ),
        (k.kubeconfig_user.is_some(), "-kubeconfig-user"),
        (k.kubeconfig_cluster.is_some(), "-kubeconfig-cluster"),
    ]
    .into_iter()
    .find(|(given, _)| *given);
    if let Some((_, flag)) = kubeconfig_flag
        && args.kubeconfig_out.is_none()
    {
        // As in k0sctl (action/apply.go: only with KubeconfigOut), they do nothing alone.
        eprintln!(
            "Note: {flag} shapes the kubeconfig -kubeconfig-out writes; without -kubeconfig-out it changes nothing."
        );
    }
    if dry_run && args.kubeconfig_out.is_some() {
        eprintln!("Note: a dry run writes no kubeconfig (-kubeconfig-out).");
    }
    Ok(())
}

/// k0sctl apply's flags that set the spec's options for this run: `--no-wait` is
/// `options.wait.enabled: false` (cmd/apply.go: `NoWait: no-wait || !Wait.Enabled`),
/// `--evict-taint` replaces `options.evictTaint` (`<key=value>:<effect>`, controllerWorkers
/// off), `--concurrency` and `--concurrent-uploads` replace `options.concurrency.limit` and
/// `.uploads` (cmd/flags.go `initManager`; 0 is no limit).
fn k0sctl_overrides(
    spec: &mut crate::spec::Spec,
    k: &crate::cli::K0sctlApplyArgs,
    run: &crate::cli::RunArgs,
) -> Result<(), Failure> {
    let o = &mut spec.options;
    if k.no_wait {
        o.wait = false;
    }
    if let Some(n) = run.concurrency {
        o.concurrency_limit = n;
    }
    if let Some(n) = k.concurrent_uploads {
        o.concurrent_uploads = n;
    }
    if let Some(t) = &k.evict_taint {
        o.evict_taint = Some(
            crate::spec::EvictTaint::from_flag(t)
                .map_err(|e| Failure::error(format!("-evict-taint {t:?}: {e}")))?,
        );
    }
    Ok(())
}

/// `-kubeconfig-out`: the admin kubeconfig of the cluster as it is now, from the state just
/// written. A secret: it goes to the file only, never to the events or the progress lines.
async fn write_kubeconfig(
    global: &GlobalArgs,
    spec: &crate::spec::Spec,
    transport: &SshTransport,
    path: &std::path::Path,
    (over, refuse_first_contact): (&crate::kubeconfig::Overrides, bool),
) -> Result<(), Failure> {
    let state = engine::load_state(super::open_store(global)?)?.state;
    let kc = crate::kubeconfig::fetch(spec, &state, transport, over, refuse_first_contact).await?;
    crate::kubeconfig::write(path, &kc)?;
    eprintln!("Kubeconfig written to {}", path.display());
    Ok(())
}

/// Steps an earlier run started and did not see finish (it was killed) are recorded as intents.
/// The plan was just made from what the hosts show now, so it already accounts for whatever those
/// steps did or did not do: once it is approved, the intents are settled and dropped.
fn resolve_intents(planned: &mut Planned) -> Result<(), Failure> {
    let n = planned.state.state.intents.len();
    if n == 0 {
        return Ok(());
    }
    planned.state.state.intents.clear();
    planned.state.store.write(&planned.state.state)?;
    eprintln!(
        "Settled {n} unfinished step{} of an earlier run against what the hosts show now.",
        if n == 1 { "" } else { "s" }
    );
    Ok(())
}

/// A destroy with nothing left to reset: a state that still names a cluster but records no host
/// (hosts removed with `state rm`, or a run killed between its last two checkpoints) is emptied.
fn forget_empty_cluster(planned: &mut Planned) -> Result<(), Failure> {
    let state = &mut planned.state.state;
    if state.cluster.is_none() || !state.hosts.is_empty() {
        return Ok(());
    }
    state.cluster = None;
    planned.state.store.write(state)?;
    eprintln!("No host is left: the cluster's identity was removed from the state.");
    Ok(())
}

/// Ask for the cluster's name before destroying it; refuse without a terminal or with
/// `-input=false`.
fn confirm_destroy(input: bool, json: bool, cluster: &str) -> Result<(), Failure> {
    if !input {
        return Err(Failure::error(
            "destroy needs confirmation but -input=false forbids asking: review the plan and use -auto-approve",
        ));
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::error(
            "destroy needs confirmation but there is no terminal: review the plan and use -auto-approve",
        ));
    }
    let question = format!(
        "\nDo you really want to destroy cluster \"{}\"?\n  Every host above is stopped and reset (k0s reset: etcd data, certificates, containers); this cannot be undone.\n  Only the cluster's name will be accepted to approve.\n\n  Enter the cluster's name: ",
        crate::ui::escape(cluster)
    );
    let answer = ask(&question, json)?;
    if answer.trim_end_matches(['\n', '\r']) != cluster || cluster.is_empty() {
        return Err(Failure::error(
            "destroy cancelled: the answer is not the cluster's name",
        ));
    }
    Ok(())
}

/// The plan before anything runs: as text on stdout, or with `-json` as a `planned` event line
/// on stdout, and then as text on stderr when that is a terminal and a `yes` will be asked for,
/// so the person answering sees what they approve.
fn show_plan(args: &ApplyArgs, plan: &crate::plan::Plan, color: bool) {
    if !args.json {
        print!("{}", render::text(plan, color));
        return;
    }
    JsonSink::new(std::io::stdout()).event(&ApplyEvent::Planned {
        plan: Box::new(plan.clone()),
    });
    let asks =
        (args.plan_file.is_none() || plan.destroy) && plan.has_changes() && !args.auto_approve;
    if asks && std::io::stderr().is_terminal() {
        let color = color && ui::stderr_is_tty();
        eprint!("{}", render::text(plan, color));
    }
}

/// Ask for `yes` on a terminal; refuse without one or with `-input=false`. With `-json` the
/// question goes to stderr, so stdout stays JSON lines.
fn confirm(input: bool, json: bool) -> Result<(), Failure> {
    if !input {
        return Err(Failure::error(
            "apply needs confirmation but -input=false forbids asking: review the plan and use -auto-approve, or apply a saved plan file",
        ));
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::error(
            "apply needs confirmation but there is no terminal: review the plan and use -auto-approve, or apply a saved plan file",
        ));
    }
    let question = "\nDo you want to perform these actions?\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ";
    if ask(question, json)?.trim() != "yes" {
        return Err(Failure::error("apply cancelled"));
    }
    Ok(())
}

/// Print `question` (on stderr with `-json`, so stdout stays JSON lines) and read one line.
fn ask(question: &str, json: bool) -> Result<String, Failure> {
    if json {
        eprint!("{question}");
        let _ = std::io::stderr().flush();
    } else {
        print!("{question}");
        let _ = std::io::stdout().flush();
    }
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::error(format!("cannot read the answer: {e}")))?;
    Ok(answer)
}

/// What to call each host in progress lines, as the planner names nodes: the spec's hostname,
/// else what the host said, else the state's node name (the plan's names win over these).
fn display_names(
    spec: &crate::spec::Spec,
    state: &crate::state::State,
    probed: &std::collections::HashMap<crate::hostid::HostId, String>,
) -> std::collections::HashMap<crate::hostid::HostId, String> {
    let mut names = std::collections::HashMap::new();
    for h in &state.hosts {
        if let Some(n) = &h.node_name {
            names.insert(h.id(), n.clone());
        }
    }
    for (id, n) in probed {
        names.insert(id.clone(), n.to_lowercase());
    }
    for h in &spec.hosts {
        if let Some(n) = &h.hostname {
            names.insert(h.id(), n.to_lowercase());
        }
    }
    names
}

async fn execute(
    global: &GlobalArgs,
    args: &ApplyArgs,
    transport: &SshTransport,
    planned: Planned,
    deadline: Option<(tokio::time::Instant, std::time::Duration)>,
) -> Result<Exit, Failure> {
    let Planned {
        loaded,
        state: mut ctx,
        plan,
        reality,
        desired,
        ..
    } = planned;
    // uploadBinary: every release binary the plan uploads, downloaded once into the local
    // cache before any step runs, so a failed download changes no host.
    let mirror = engine::mirror()?;
    let progress = !args.json && ui::stderr_is_tty();
    let binaries = tokio::task::block_in_place(|| {
        crate::binaries::cache_uploads(&plan, &desired, &mirror, progress)
    })
    .map_err(Failure::error)?;
    let remote = Remote {
        transport: Arc::new(transport.clone()),
        prober: Arc::new(engine::SshProber::new(
            transport.clone(),
            &loaded.spec,
            &ctx.state,
        )),
    };
    let hostnames = reality
        .hosts
        .iter()
        .filter_map(|h| {
            let name = h.probe.facts()?.hostname.trim();
            (!name.is_empty()).then(|| (h.id.clone(), name.to_string()))
        })
        .collect();
    let names = display_names(&loaded.spec, &ctx.state, &hostnames);
    let opts = ExecOptions {
        parallelism: super::hosts_at_once(
            args.target.parallelism,
            &loaded.spec,
            ctx.state.hosts.len(),
        ),
        hostnames,
        names,
        binaries,
        download_timeout: mirror.timeout,
        ..ExecOptions::default()
    };
    let mut human = HumanSink::new(
        std::io::stdout(),
        !global.no_color && ui::stdout_color(),
        ui::stderr_is_tty(),
    );
    let mut json = JsonSink::new(std::io::stdout());
    let sink: &mut dyn EventSink = if args.json { &mut json } else { &mut human };
    let cancel = Cancel::new();
    cancel.interrupt_on_ctrl_c();
    // -timeout (k0sctl's --timeout): when it is reached, as one Ctrl-C: nothing new starts,
    // running steps finish and are recorded, the run fails.
    let timer = deadline.map(|(at, d)| {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            eprintln!(
                "-timeout {} reached: no new step starts; waiting for the running ones",
                humantime::format_duration(d)
            );
            cancel.interrupt();
        })
    });
    let store = &mut ctx.store;
    let mut checkpoint = |s: &crate::state::State| store.write(s).map(|_| ());
    let mut state = ctx.state.clone();
    let result = apply::execute(
        &plan,
        &loaded.spec,
        &mut state,
        remote,
        &opts,
        sink,
        &mut checkpoint,
        &cancel,
    )
    .await;
    if let Some(t) = timer {
        t.abort();
    }
    match result {
        Ok(_) => Ok(Exit::Success),
        Err(e) => Err(Failure {
            exit: e.exit(),
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{K0sctlApplyArgs, RunArgs};

    /// k0sctl apply's option flags set the spec's options for the run; without them the spec's
    /// own values stay.
    #[test]
    fn k0sctl_flags_set_the_spec_options() {
        let mut spec = crate::spec::Spec::default();
        let before = spec.options.clone();
        k0sctl_overrides(&mut spec, &Default::default(), &Default::default()).expect("ok");
        assert_eq!(spec.options, before);
        let k = K0sctlApplyArgs {
            no_wait: true,
            concurrent_uploads: Some(0),
            evict_taint: Some("a/b=c:NoSchedule".into()),
            ..Default::default()
        };
        let run = RunArgs {
            concurrency: Some(7),
            ..Default::default()
        };
        k0sctl_overrides(&mut spec, &k, &run).expect("ok");
        let o = &spec.options;
        assert!(!o.wait);
        assert_eq!(o.concurrency_limit, 7);
        assert_eq!(o.concurrent_uploads, 0, "0: no limit, as in the spec");
        let t = o.evict_taint.as_ref().expect("taint");
        assert_eq!(
            (t.taint.as_str(), t.effect.as_str()),
            ("a/b=c", "NoSchedule")
        );
        assert!(!t.controller_workers);
        let bad = K0sctlApplyArgs {
            evict_taint: Some("a=b:c:NoSchedule".into()),
            ..Default::default()
        };
        assert!(k0sctl_overrides(&mut spec, &bad, &run).is_err());
    }
}

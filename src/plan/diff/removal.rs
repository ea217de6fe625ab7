//! Taking a host out of the cluster: drain its Node, remove its etcd member (quorum-checked,
//! through another controller), delete its Node, EtcdMember and ControlNode objects, reset the
//! host if it is still the recorded machine, and forget it in the state.

use super::Planner;
use super::decision::{Decision, HostPlan};
use super::hosts::HostCtx;
use super::steps::Chain;
use crate::plan::model::{ObjectKind, Refusal, RefusalKind, StepKind};
use crate::reality::Probe;
use crate::spec::is_object_name;

impl Planner<'_> {
    /// Drain, remove the member (quorum-checked, gated, and checked against its EtcdMember object,
    /// so the objects go after it: a removed member can no longer recreate them), delete the
    /// objects, reset, forget.
    pub(super) fn build_removal(&self, c: &mut Chain, p: &HostPlan) -> Result<(), Refusal> {
        let h = &self.hosts[p.idx];
        let Decision::Remove { member, reset } = &p.decision else {
            return Ok(());
        };
        let name = h.name();
        if !self.opts.destroy
            && let Some(r) = self.objects_of_another_host(h)
        {
            return Err(r);
        }
        // Quorum first: "would leave 0 healthy" says more than "nobody to act through".
        if let Some(m) = member {
            c.quorum.remove(&m.member_id, &m.peer_url, &name)?;
        }
        let via = c.vias.for_subject(&h.id, &name)?;
        // The controller acted through may have joined in this plan: wait for the chain.
        let mut first_dep = c.gate;
        if h.role().has_node() && self.drains() && self.cluster.nodes.contains_key(&name) {
            c.b.push(
                p.idx,
                &h.id,
                StepKind::Drain {
                    node: name.clone(),
                    via: via.clone(),
                    evict_taint: None,
                },
                [first_dep.take()],
            );
        }
        if let Some(m) = member {
            let prev = c.b.last_of(p.idx);
            c.remove_member(p.idx, &h.id, m, &via, prev);
        }
        let objects = self.existing_objects(h);
        if !objects.is_empty() {
            let prev = c.b.last_of(p.idx);
            let del = c.b.push(
                p.idx,
                &h.id,
                self.delete_objects_step(h, objects, via.clone()),
                [prev, first_dep.take()],
            );
            // The controller it acts through may be the next one to leave: the next
            // membership change waits for this deletion.
            if member.is_some() {
                c.gate = Some(del);
            }
        }
        c.vias.removed.insert(h.id.clone());
        if let Some(mid) = reset {
            let prev = c.b.last_of(p.idx);
            c.b.push(
                p.idx,
                &h.id,
                StepKind::ResetHost {
                    machine_id: mid.clone(),
                    uninstall: false,
                },
                [prev],
            );
        }
        if h.state.is_some() {
            let prev = c.b.last_of(p.idx);
            c.b.push(p.idx, &h.id, StepKind::ForgetHost, [prev]);
        }
        Ok(())
    }

    /// A removed host whose objects are evidently another host's: its Node reports the address
    /// of another host of the spec (or of another machine that answered the probe), an object
    /// it would delete (Node, EtcdMember, ControlNode) has the name another such host goes by,
    /// or the host does not answer while its Node is Ready (a kubelet still posts its status).
    /// Whatever role the state records: a record saying `controller` deletes a Node too. The
    /// machine most likely runs at another address (a move the plan could not see, e.g. with
    /// `-exclude NEW`), or the state's record is wrong; draining and deleting would take
    /// another host's pods, Node or etcd objects away.
    fn objects_of_another_host(&self, h: &HostCtx) -> Option<Refusal> {
        let name = h.name();
        let has_node = self.cluster.nodes.contains_key(&name);
        let norm = |a: &str| {
            a.parse::<std::net::IpAddr>()
                .map(|ip| ip.to_string())
                .unwrap_or_else(|_| a.to_string())
        };
        let ips = self.cluster.node_ips.get(&name).filter(|_| has_node);
        // The hosts whose objects must stay: those of the spec, and the machines that answered.
        let others = || {
            self.hosts
                .iter()
                .filter(|o| o.id != h.id && (o.spec.is_some() || o.facts().is_some()))
        };
        let who = |other: &HostCtx| match other.name() {
            n if n == other.id.to_string() || n == other.id.address => n,
            n => format!("{n} ({})", other.id),
        };
        let elsewhere = others().find_map(|other| {
            let spec_addrs = other
                .spec
                .map(|s| [Some(s.ssh.address.as_str()), s.private_address.as_deref()])
                .unwrap_or_default();
            let answered = other.facts().map(|_| other.id.address.as_str());
            let ip = spec_addrs
                .into_iter()
                .chain([answered])
                .flatten()
                .map(norm)
                .find(|a| ips.is_some_and(|ips| ips.contains(a)))?;
            let what = if other.spec.is_some() {
                "a host of the spec"
            } else {
                "a machine that answers there"
            };
            Some((
                format!(
                    "its Node \"{name}\" reports the address {ip} of {}, {what}",
                    who(other)
                ),
                "that Node",
            ))
        });
        let named = || {
            let objects = self.existing_objects(h);
            let mut wanted: Vec<(ObjectKind, String)> = Vec::new();
            if has_node {
                wanted.push((ObjectKind::Node, name.clone()));
            }
            if objects.contains(&ObjectKind::EtcdMember) {
                wanted.push((ObjectKind::EtcdMember, self.etcd_member_object_name(h)));
            }
            if objects.contains(&ObjectKind::ControlNode) {
                wanted.push((ObjectKind::ControlNode, self.control_node_name(h)));
            }
            wanted.into_iter().find_map(|(kind, object)| {
                let (other, what) = others().find_map(|o| {
                    let what = self.object_owner(o)?;
                    self.names_of(o).contains(&object).then_some((o, what))
                })?;
                Some((
                    format!(
                        "the {} \"{object}\" it would delete is named after {}, {what}",
                        super::details::object_list(&[kind]),
                        who(other),
                    ),
                    "another host's objects",
                ))
            })
        };
        let unanswered = matches!(h.probe, None | Some(Probe::Unreachable { .. }));
        let (why, what) = elsewhere.or_else(named).or_else(|| {
            (has_node && unanswered && self.cluster.ready_nodes.contains(&name)).then(|| {
                (
                    format!(
                        "it does not answer while its Node \"{name}\" is Ready: a kubelet still posts its status"
                    ),
                    "that Node",
                )
            })
        })?;
        Some(Refusal {
            kind: RefusalKind::UnknownIdentity,
            message: format!(
                "{name} ({}) leaves the spec, but {why}; refusing to drain and delete {what}",
                h.id
            ),
            details: vec![
                "if the machine moved to another address of the spec, plan without -exclude for it: a move keeps its Node and its record (or `k0sform state mv OLD NEW`)".into(),
                "if the machine is gone, wait until its Node is NotReady (the node controller marks it after ~40 s) and plan again".into(),
                format!(
                    "if {} is no machine of this cluster, its state record is wrong: check it (k0sform state show {}) and forget it (k0sform state rm {})",
                    h.id, h.id, h.id
                ),
            ],
        })
    }

    /// Whether the cluster objects named after host `o` are its own, and why: it runs k0s (a
    /// machine that answered, in the cluster or not), or it is a host of the spec the state
    /// records (a member of the cluster, down or excluded now). A host of the spec k0sform
    /// never recorded and not running yet (a machine replacing one of the same name) owns no
    /// object yet.
    fn object_owner(&self, o: &HostCtx) -> Option<&'static str> {
        if o.facts().is_some_and(|f| f.is_running()) {
            Some(if o.spec.is_some() {
                "a host of the spec that runs k0s"
            } else {
                "a machine that answered the probe running k0s"
            })
        } else if o.spec.is_some() && o.state.is_some() {
            Some("a recorded host of the spec")
        } else {
            None
        }
    }

    /// Every name host `o` goes by, lower-cased: its node name, its spec and recorded names,
    /// the hostname it reports and its etcd member's name.
    fn names_of(&self, o: &HostCtx) -> Vec<String> {
        let mut v = vec![o.name().to_lowercase()];
        v.extend(o.known_names());
        v.extend(Self::os_hostname(o));
        v.extend(self.member_name(o));
        v
    }

    /// The cluster objects that still name the host.
    pub(super) fn existing_objects(&self, h: &HostCtx) -> Vec<ObjectKind> {
        let name = h.name();
        let mut v = Vec::new();
        if self.cluster.nodes.contains_key(&name) {
            v.push(ObjectKind::Node);
        }
        if h.role().is_controller() {
            // A kine controller has neither a member nor an EtcdMember object.
            if self.member_of(&h.id).is_some() || h.state.and_then(|s| s.etcd.as_ref()).is_some() {
                v.push(ObjectKind::EtcdMember);
            }
            if self
                .cluster
                .control_nodes
                .contains(&self.control_node_name(h))
            {
                v.push(ObjectKind::ControlNode);
            }
        }
        v
    }

    /// `DeleteObjects` for `objects` of host `h`, each by the name k0s gives it.
    pub(super) fn delete_objects_step(
        &self,
        h: &HostCtx,
        objects: Vec<ObjectKind>,
        via: crate::hostid::HostId,
    ) -> StepKind {
        let node = h.name();
        let other = |kind: ObjectKind, name: String| {
            (objects.contains(&kind) && name != node).then_some(name)
        };
        StepKind::DeleteObjects {
            etcd_member: other(ObjectKind::EtcdMember, self.etcd_member_object_name(h)),
            control_node: other(ObjectKind::ControlNode, self.control_node_name(h)),
            node,
            objects,
            via,
        }
    }

    /// The host's OS hostname, lower-cased, when it answered the probe (`uname -n`, what Go's
    /// `os.Hostname` reads).
    fn os_hostname(h: &HostCtx) -> Option<String> {
        h.facts()
            .map(|f| f.hostname.trim().to_lowercase())
            .filter(|n| is_object_name(n))
    }

    /// Its etcd member's name (the raw OS hostname, or `storage.etcd.extraArgs.name`),
    /// lower-cased, as the cluster lists it.
    fn member_name(&self, h: &HostCtx) -> Option<String> {
        self.member_of(&h.id)
            .map(|m| m.name.trim().to_lowercase())
            .filter(|n| is_object_name(n))
    }

    /// The EtcdMember object's name: k0s names it after the etcd member name, lower-cased from
    /// v1.34.1 and as is from v1.30 (k0s `pkg/component/controller/etcd_member_reconciler.go`,
    /// `nodeutil.GetHostname(memberName)`, before it `EtcdConfig.GetNodeName`). As is, a name
    /// with capitals is refused by the API server, so no object exists: the lower-cased member
    /// name finds the object whenever there is one. Never `hostname:`.
    fn etcd_member_object_name(&self, h: &HostCtx) -> String {
        self.member_name(h)
            .or_else(|| Self::os_hostname(h))
            .unwrap_or_else(|| h.name())
    }

    /// The ControlNode object's name: the lower-cased OS hostname (autopilot's effective
    /// hostname, `AUTOPILOT_HOSTNAME` aside: k0s `pkg/autopilot/controller/setup.go`,
    /// `pkg/autopilot/common/hostname.go`), never `--hostname-override`. For a host that does
    /// not answer, its etcd member's name (the same OS hostname unless etcd's `name` is set).
    /// The first of those, then its recorded and Node names, that the cluster lists.
    fn control_node_name(&self, h: &HostCtx) -> String {
        let candidates: Vec<String> = [Self::os_hostname(h), self.member_name(h)]
            .into_iter()
            .flatten()
            .chain(h.known_names())
            .chain([h.name()])
            .collect();
        candidates
            .iter()
            .find(|n| self.cluster.control_nodes.contains(*n))
            .unwrap_or(&candidates[0])
            .clone()
    }
}

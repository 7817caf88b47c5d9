//! `pacto status`: reads a Pacto (or every Pacto), its Events and, for EVIDENCE_STALE, the node
//! Leases through the user's kubeconfig, and prints `status_view`'s rendering; `--watch`
//! re-prints on every change of the Pacto and, for one Pacto, on every Event about it (two
//! kube-runtime watchers; an Event watch the user may not run is simply not followed).

use std::io::{IsTerminal as _, Write as _};

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use pacto_api::Pacto;
use serde::Serialize;

use crate::status_view::{self, NodeLease, Style};
use crate::{StatusArgs, StatusOutput};

/// The resource as `kubectl` and RBAC name it.
const PACTOS: &str = "pactos.pacto.trianalab.io";

/// Why `pacto status` could not show a status.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("reading the kubeconfig")]
    Config(#[source] kube::config::InferConfigError),
    #[error("creating the Kubernetes client")]
    Client(#[source] kube::Error),
    #[error("cannot {verb} {resource} {object}: {reason}: {message}")]
    Refused {
        verb: &'static str,
        resource: &'static str,
        object: String,
        reason: String,
        message: String,
    },
    #[error("{resource} {object} not found")]
    NotFound {
        resource: &'static str,
        object: String,
    },
    #[error("cannot {verb} {resource} {object}")]
    Api {
        verb: &'static str,
        resource: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("watching {resource} {object}")]
    Watch {
        resource: &'static str,
        object: String,
        #[source]
        source: watcher::Error,
    },
    #[error("rendering the status as {format}: {message}")]
    Render {
        format: &'static str,
        message: String,
    },
    #[error("writing to stdout")]
    Stdout(#[source] std::io::Error),
}

impl StatusError {
    /// Maps an API error on `verb resource object`: 403 and 401 name the refused permission, 404
    /// is not-found.
    fn api(verb: &'static str, resource: &'static str, object: String, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) if status.code == 404 => Self::NotFound { resource, object },
            kube::Error::Api(status) if status.code == 403 || status.code == 401 => Self::Refused {
                verb,
                resource,
                object,
                reason: if status.code == 403 {
                    "forbidden".to_owned()
                } else {
                    "unauthorized".to_owned()
                },
                message: status.message.clone(),
            },
            source => Self::Api {
                verb,
                resource,
                object,
                source,
            },
        }
    }
}

/// What to show: one Pacto or every Pacto.
enum Scope {
    One { namespace: String, name: String },
    All { namespace: Option<String> },
}

struct Reader {
    client: kube::Client,
    node_agent_namespace: String,
}

impl Reader {
    async fn one(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<status_view::StatusReport, StatusError> {
        let object = format!("{namespace}/{name}");
        let api: Api<Pacto> = Api::namespaced(self.client.clone(), namespace);
        let pacto = api
            .get(name)
            .await
            .map_err(|e| StatusError::api("get", PACTOS, object.clone(), e))?;
        Ok(self.report(&pacto).await)
    }

    async fn report(&self, pacto: &Pacto) -> status_view::StatusReport {
        let namespace = pacto.metadata.namespace.clone().unwrap_or_default();
        let name = pacto.metadata.name.clone().unwrap_or_default();
        let events_api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let selector = format!("involvedObject.kind=Pacto,involvedObject.name={name}");
        let (events, events_note) = match events_api
            .list(&ListParams::default().fields(&selector))
            .await
        {
            Ok(list) => (list.items, None),
            Err(e) => (
                Vec::new(),
                Some(pacto_contract::error_chain(&StatusError::api(
                    "list",
                    "events",
                    format!("in namespace {namespace}"),
                    e,
                ))),
            ),
        };
        let now = Timestamp::now();
        // The nodes come from the findings, so the report is built once to name them.
        let first = status_view::report(pacto, &events, &[], now);
        let mut leases = Vec::new();
        let leases_api: Api<Lease> =
            Api::namespaced(self.client.clone(), &self.node_agent_namespace);
        for node in status_view::stale_nodes(&first.findings) {
            let renewed = match leases_api.get_opt(&node).await {
                Ok(Some(lease)) => Ok(lease.spec.and_then(|s| s.renew_time).map(|t| t.0)),
                Ok(None) => Err(format!("no Lease {}/{node}", self.node_agent_namespace)),
                Err(e) => Err(pacto_contract::error_chain(&StatusError::api(
                    "get",
                    "leases.coordination.k8s.io",
                    format!("{}/{node}", self.node_agent_namespace),
                    e,
                ))),
            };
            leases.push(NodeLease { node, renewed });
        }
        let mut report = status_view::report(pacto, &events, &leases, now);
        report.events_note = events_note;
        report
    }

    async fn all(&self, namespace: Option<&str>) -> Result<status_view::Table, StatusError> {
        let (api, object): (Api<Pacto>, String) = match namespace {
            Some(ns) => (
                Api::namespaced(self.client.clone(), ns),
                format!("in namespace {ns}"),
            ),
            None => (
                Api::all(self.client.clone()),
                "in all namespaces".to_owned(),
            ),
        };
        let mut list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| StatusError::api("list", PACTOS, object, e))?
            .items;
        list.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        Ok(status_view::table(&list, Timestamp::now()))
    }
}

fn render<T: Serialize>(
    value: &T,
    output: StatusOutput,
    text: impl FnOnce(&T) -> String,
) -> Result<String, StatusError> {
    match output {
        StatusOutput::Text => Ok(text(value)),
        StatusOutput::Json => serde_json::to_string_pretty(value)
            .map(|mut s| {
                s.push('\n');
                s
            })
            .map_err(|e| StatusError::Render {
                format: "JSON",
                message: e.to_string(),
            }),
        StatusOutput::Yaml => serde_norway::to_string(value).map_err(|e| StatusError::Render {
            format: "YAML",
            message: e.to_string(),
        }),
    }
}

fn print(text: &str) -> Result<(), StatusError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(StatusError::Stdout)
}

/// Runs `pacto status`.
pub async fn run(args: &StatusArgs) -> Result<(), StatusError> {
    let style = Style::detect(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    // kube's rustls needs the process-level crypto provider; an earlier install is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::infer().await.map_err(StatusError::Config)?;
    let scope = match (&args.name, args.all_namespaces) {
        (Some(name), false) => Scope::One {
            namespace: args
                .namespace
                .clone()
                .unwrap_or_else(|| config.default_namespace.clone()),
            name: name.clone(),
        },
        (_, true) => Scope::All { namespace: None },
        (None, false) => match &args.namespace {
            Some(ns) => Scope::All {
                namespace: Some(ns.clone()),
            },
            None => Scope::All { namespace: None },
        },
    };
    let client = kube::Client::try_from(config).map_err(StatusError::Client)?;
    let reader = Reader {
        client,
        node_agent_namespace: args.node_agent_namespace.clone(),
    };
    let once = async |reader: &Reader| -> Result<String, StatusError> {
        match &scope {
            Scope::One { namespace, name } => {
                let report = reader.one(namespace, name).await?;
                render(&report, args.output, |r| status_view::text(r, style))
            }
            Scope::All { namespace } => {
                let table = reader.all(namespace.as_deref()).await?;
                render(&table, args.output, |t| status_view::table_text(t, style))
            }
        }
    };
    let first = once(&reader).await?;
    print(&first)?;
    if !args.watch {
        return Ok(());
    }
    let (api, config, object): (Api<Pacto>, watcher::Config, String) = match &scope {
        Scope::One { namespace, name } => (
            Api::namespaced(reader.client.clone(), namespace),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
            format!("{namespace}/{name}"),
        ),
        Scope::All {
            namespace: Some(ns),
        } => (
            Api::namespaced(reader.client.clone(), ns),
            watcher::Config::default(),
            format!("in namespace {ns}"),
        ),
        Scope::All { namespace: None } => (
            Api::all(reader.client.clone()),
            watcher::Config::default(),
            "in all namespaces".to_owned(),
        ),
    };
    let mut last = first;
    // Events about the one Pacto are a change worth a re-print too (a new event, or a count
    // moving); they are merged into the Pacto watch as Apply-like ticks.
    let events = match &scope {
        Scope::One { namespace, name } => {
            let api: Api<Event> = Api::namespaced(reader.client.clone(), namespace);
            let config = watcher::Config::default().fields(&format!(
                "involvedObject.kind=Pacto,involvedObject.name={name}"
            ));
            watcher(api, config)
                .take_while(|event| futures::future::ready(event.is_ok()))
                .filter_map(|event| {
                    futures::future::ready(match event {
                        Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                            Some(Ok(watcher::Event::InitDone))
                        }
                        _ => None,
                    })
                })
                .boxed()
        }
        Scope::All { .. } => futures::stream::empty().boxed(),
    };
    let pactos = watcher(api, config);
    let mut changes = std::pin::pin!(futures::stream::select(pactos, events));
    while let Some(event) = changes.next().await {
        match event {
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => {
                let now = once(&reader).await?;
                if now != last {
                    let separator = match args.output {
                        StatusOutput::Yaml => "---\n",
                        StatusOutput::Text | StatusOutput::Json => "\n",
                    };
                    print(&format!("{separator}{now}"))?;
                    last = now;
                }
            }
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Err(source) => {
                return Err(StatusError::Watch {
                    resource: PACTOS,
                    object,
                    source,
                });
            }
        }
    }
    Ok(())
}

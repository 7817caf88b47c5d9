//! Step 2 of a reconcile: the PactoRevision of the resolved contract, created when missing
//! (and its status backfilled). [`create`] is shared with the revision mirror. Revision errors
//! are logged only; they never fail a reconcile.

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use pacto_api::{Pacto, PactoRevision};

use crate::model::{EnsuredRevision, ResolvedContract};
use crate::reconcile::now;
use crate::revision::{
    RevisionInput, needs_backfill, resolved_status, revision_name, revision_object,
    revision_version,
};

/// What [`create`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creation {
    /// The revision was created (and its status written).
    Created,
    /// A revision of that name exists already.
    Existed,
    /// The API refused (logged).
    Failed,
}

/// Writes the status of a recorded revision (resolved, content hash, creation time).
async fn write_resolved_status(
    api: &Api<PactoRevision>,
    name: &str,
    hash: &str,
) -> Result<(), kube::Error> {
    let status = Patch::Merge(serde_json::json!({ "status": resolved_status(hash, &now()) }));
    api.patch_status(name, &PatchParams::default(), &status)
        .await
        .map(drop)
}

/// Creates the revision described by `input` and, when new, writes its status.
pub async fn create(api: &Api<PactoRevision>, input: &RevisionInput<'_>) -> Creation {
    let object = revision_object(input);
    let name = object.name_any();
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => {
            if let Err(error) = write_resolved_status(api, &name, input.hash).await {
                tracing::warn!(%error, revision = %name, "cannot write PactoRevision status");
            }
            Creation::Created
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Creation::Existed,
        Err(error) => {
            tracing::warn!(%error, revision = %name, "cannot create PactoRevision");
            Creation::Failed
        }
    }
}

/// Step 2: the revision of the resolved contract, created if missing; an existing
/// revision whose status lacks what a new one records is backfilled. `None` when the API
/// failed (logged).
pub async fn ensure(
    client: &Client,
    pacto: &Pacto,
    namespace: &str,
    resolved: &ResolvedContract,
) -> Option<EnsuredRevision> {
    let api: Api<PactoRevision> = Api::namespaced(client.clone(), namespace);
    let pacto_name = pacto.name_any();
    let version = revision_version(&resolved.contract.service.version).to_owned();
    let name = revision_name(&pacto_name, &version, &resolved.content_hash);
    let existing = match api.get_opt(&name).await {
        Ok(existing) => existing,
        Err(error) => {
            tracing::warn!(%error, revision = %name, "cannot read PactoRevision");
            return None;
        }
    };
    let created = if let Some(existing) = existing {
        if needs_backfill(existing.status.as_ref())
            && let Err(error) = write_resolved_status(&api, &name, &resolved.content_hash).await
        {
            tracing::warn!(%error, revision = %name, "cannot backfill PactoRevision status");
        }
        false
    } else {
        let uid = pacto.uid().unwrap_or_default();
        let input = RevisionInput {
            pacto_name: &pacto_name,
            namespace,
            pacto_uid: &uid,
            version: &version,
            service_name: &resolved.contract.service.name,
            hash: &resolved.content_hash,
            resolved_ref: resolved.resolved_ref.as_deref(),
            digest: resolved.digest.as_deref(),
            spec_oci: pacto.spec.contract_ref.oci.as_deref(),
            inline: pacto
                .spec
                .contract_ref
                .inline
                .as_deref()
                .is_some_and(|i| !i.is_empty()),
        };
        match create(&api, &input).await {
            Creation::Created => true,
            // Created by a concurrent pass: its status is written (again) all the same.
            Creation::Existed => {
                if let Err(error) = write_resolved_status(&api, &name, &resolved.content_hash).await
                {
                    tracing::warn!(%error, revision = %name, "cannot write PactoRevision status");
                }
                false
            }
            Creation::Failed => return None,
        }
    };
    Some(EnsuredRevision {
        name,
        created,
        version,
    })
}

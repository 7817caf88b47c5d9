//! gRPC API compatibility (proto/README.md, "Compatibility"): the current `proto/` against the
//! descriptor set of the last release, `proto/released/v1.binpb`. A released `v1` API may only
//! grow: removing a message, enum, service or RPC, removing an enum value, removing a field
//! without reserving its number, renumbering or renaming a field, or changing a field's type,
//! label or oneof, or an RPC's request/response type or streaming, fails the build. Additions pass.
//!
//! After a release, record its API: `PACTO_UPDATE_RELEASED_PROTO=1 cargo test -p pacto-proto
//! --test compat` (scripts/release.sh prints the command).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use prost::Message as _;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorSet,
    MethodDescriptorProto, ServiceDescriptorProto,
};

const PROTOS: &[&str] = &[
    "pacto/common/v1/contract.proto",
    "pacto/common/v1/evidence.proto",
    "pacto/evaluator/v1/evaluator.proto",
    "pacto/observer/v1/observer.proto",
    "pacto/resolver/v1/resolver.proto",
];

fn proto_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto")
}

fn released_path() -> PathBuf {
    proto_root().join("released/v1.binpb")
}

/// The current protos as a descriptor set, without source info (comments do not matter) and
/// without the well-known imports (they are not ours).
fn current() -> FileDescriptorSet {
    let mut set = protox::compile(PROTOS, [proto_root()]).expect("proto/ compiles");
    set.file.retain(|f| f.package().starts_with("pacto."));
    for f in &mut set.file {
        f.source_code_info = None;
    }
    set.file.sort_by(|a, b| a.name().cmp(b.name()));
    set
}

/// Everything a descriptor set declares, by fully qualified name.
#[derive(Default)]
struct Index<'a> {
    messages: BTreeMap<String, &'a DescriptorProto>,
    enums: BTreeMap<String, &'a EnumDescriptorProto>,
    services: BTreeMap<String, &'a ServiceDescriptorProto>,
}

fn index(set: &FileDescriptorSet) -> Index<'_> {
    fn message<'a>(ix: &mut Index<'a>, scope: &str, m: &'a DescriptorProto) {
        let name = format!("{scope}.{}", m.name());
        for e in &m.enum_type {
            ix.enums.insert(format!("{name}.{}", e.name()), e);
        }
        for nested in &m.nested_type {
            message(ix, &name, nested);
        }
        ix.messages.insert(name, m);
    }
    let mut ix = Index::default();
    for f in &set.file {
        let scope = format!(".{}", f.package());
        for m in &f.message_type {
            message(&mut ix, &scope, m);
        }
        for e in &f.enum_type {
            ix.enums.insert(format!("{scope}.{}", e.name()), e);
        }
        for s in &f.service {
            ix.services.insert(format!("{scope}.{}", s.name()), s);
        }
    }
    ix
}

/// How a field travels: its label, type (with the message/enum name) and oneof.
fn shape(m: &DescriptorProto, f: &FieldDescriptorProto) -> String {
    let oneof = f
        .oneof_index
        .filter(|_| !f.proto3_optional())
        .and_then(|i| m.oneof_decl.get(usize::try_from(i).ok()?))
        .map_or(String::new(), |o| format!(" in oneof {}", o.name()));
    let type_name = f
        .type_name
        .as_deref()
        .map_or(String::new(), |t| format!(" {t}"));
    format!("{:?} {:?}{type_name}{oneof}", f.label(), f.r#type())
}

/// An RPC's request and response, with their streaming.
fn signature(m: &MethodDescriptorProto) -> String {
    format!(
        "({}{}) returns ({}{})",
        if m.client_streaming() { "stream " } else { "" },
        m.input_type(),
        if m.server_streaming() { "stream " } else { "" },
        m.output_type()
    )
}

fn field_changes(name: &str, om: &DescriptorProto, nm: &DescriptorProto, out: &mut Vec<String>) {
    for of in &om.field {
        let number = of.number();
        let Some(nf) = nm.field.iter().find(|f| f.number() == number) else {
            if let Some(moved) = nm.field.iter().find(|f| f.name() == of.name()) {
                out.push(format!(
                    "field {name}.{} renumbered {number} -> {}",
                    of.name(),
                    moved.number()
                ));
            } else if !nm
                .reserved_range
                .iter()
                .any(|r| r.start() <= number && number < r.end())
            {
                out.push(format!(
                    "field {name}.{} ({number}) removed without `reserved {number};`",
                    of.name()
                ));
            }
            continue;
        };
        if nf.name() != of.name() {
            out.push(format!(
                "field {name}.{} ({number}) renamed to {}",
                of.name(),
                nf.name()
            ));
        }
        let (was, is) = (shape(om, of), shape(nm, nf));
        if was != is {
            out.push(format!(
                "field {name}.{} ({number}) changed from {was} to {is}",
                of.name()
            ));
        }
    }
}

/// The breaking changes from `old` to `new`, one line each naming the element (empty:
/// compatible).
fn breaking_changes(old: &FileDescriptorSet, new: &FileDescriptorSet) -> Vec<String> {
    let (old, new) = (index(old), index(new));
    let mut out = Vec::new();
    for (name, om) in &old.messages {
        match new.messages.get(name) {
            None => out.push(format!("message {name} removed")),
            Some(nm) => field_changes(name, om, nm, &mut out),
        }
    }
    for (name, oe) in &old.enums {
        let Some(ne) = new.enums.get(name) else {
            out.push(format!("enum {name} removed"));
            continue;
        };
        for ov in &oe.value {
            match ne.value.iter().find(|v| v.number() == ov.number()) {
                None => out.push(format!(
                    "enum value {name}.{} ({}) removed",
                    ov.name(),
                    ov.number()
                )),
                Some(nv) if nv.name() != ov.name() => out.push(format!(
                    "enum value {name}.{} ({}) renamed to {}",
                    ov.name(),
                    ov.number(),
                    nv.name()
                )),
                Some(_) => {}
            }
        }
    }
    for (name, os) in &old.services {
        let Some(ns) = new.services.get(name) else {
            out.push(format!("service {name} removed"));
            continue;
        };
        for om in &os.method {
            let Some(nm) = ns.method.iter().find(|m| m.name() == om.name()) else {
                out.push(format!("rpc {name}.{} removed", om.name()));
                continue;
            };
            if signature(om) != signature(nm) {
                out.push(format!(
                    "rpc {name}.{} changed from {} to {}",
                    om.name(),
                    signature(om),
                    signature(nm)
                ));
            }
        }
    }
    out
}

#[test]
fn the_current_protos_keep_the_released_v1_api() {
    let current = current();
    let path = released_path();
    if std::env::var("PACTO_UPDATE_RELEASED_PROTO").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir proto/released");
        std::fs::write(&path, current.encode_to_vec()).expect("write the released descriptors");
        return;
    }
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; record the released API with PACTO_UPDATE_RELEASED_PROTO=1 cargo test \
             -p pacto-proto --test compat",
            path.display()
        )
    });
    let released = FileDescriptorSet::decode(bytes.as_slice())
        .unwrap_or_else(|e| panic!("{}: not a FileDescriptorSet: {e}", path.display()));
    let broken = breaking_changes(&released, &current);
    assert!(
        broken.is_empty(),
        "proto/ breaks the released v1 API ({}):\n  {}\nAdd instead (a new field number, \
         message or RPC), or start a v2 package.",
        path.display(),
        broken.join("\n  ")
    );
}

/// Mutable access to a message or service of a descriptor set by short name.
struct Edit<'a>(&'a mut FileDescriptorSet);

impl Edit<'_> {
    fn message(&mut self, name: &str) -> &mut DescriptorProto {
        self.0
            .file
            .iter_mut()
            .flat_map(|f| f.message_type.iter_mut())
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("no message {name}"))
    }

    fn service(&mut self, name: &str) -> &mut ServiceDescriptorProto {
        self.0
            .file
            .iter_mut()
            .flat_map(|f| f.service.iter_mut())
            .find(|s| s.name() == name)
            .unwrap_or_else(|| panic!("no service {name}"))
    }
}

/// Applies `edit` to a copy of the current descriptors and returns the breaking changes found.
fn after(edit: impl FnOnce(&mut Edit)) -> Vec<String> {
    let old = current();
    let mut new = old.clone();
    edit(&mut Edit(&mut new));
    breaking_changes(&old, &new)
}

#[test]
fn the_check_catches_each_kind_of_break_and_lets_additions_pass() {
    assert_eq!(after(|_| {}), Vec::<String>::new());

    // Additions: a new field, message and RPC.
    let added = after(|ix| {
        let m = ix.message("ObserveRequest");
        let mut f = m.field[0].clone();
        f.name = Some("added_later".into());
        f.number = Some(999);
        f.json_name = Some("addedLater".into());
        m.field.push(f);
        let mut extra = m.clone();
        extra.name = Some("AddedMessage".into());
        ix.0.file[0].message_type.push(extra);
        let s = ix.service("Evaluator");
        let mut rpc = s.method[0].clone();
        rpc.name = Some("AddedRpc".into());
        s.method.push(rpc);
    });
    assert_eq!(added, Vec::<String>::new());

    let removed = after(|ix| {
        ix.message("ObserveRequest").field.remove(0);
    });
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(
        removed[0].starts_with("field .pacto.observer.v1.ObserveRequest.")
            && removed[0].contains("removed without `reserved"),
        "{removed:?}"
    );

    // Removing it with its number reserved is compatible.
    let reserved = after(|ix| {
        let m = ix.message("ObserveRequest");
        let f = m.field.remove(0);
        m.reserved_range
            .push(prost_types::descriptor_proto::ReservedRange {
                start: f.number,
                end: Some(f.number() + 1),
            });
    });
    assert_eq!(reserved, Vec::<String>::new());

    let renumbered = after(|ix| ix.message("ObserveRequest").field[0].number = Some(777));
    assert!(
        renumbered.len() == 1
            && renumbered[0].contains("renumbered")
            && renumbered[0].ends_with("-> 777"),
        "{renumbered:?}"
    );

    let retyped = after(|ix| {
        let f = &mut ix.message("ObserveRequest").field[0];
        f.r#type = Some(prost_types::field_descriptor_proto::Type::Bytes.into());
        f.type_name = None;
    });
    assert!(
        retyped.len() == 1 && retyped[0].contains("changed from") && retyped[0].ends_with("Bytes"),
        "{retyped:?}"
    );

    let rpc_gone = after(|ix| {
        ix.service("Evaluator")
            .method
            .retain(|m| m.name() != "Evaluate");
    });
    assert_eq!(
        rpc_gone,
        ["rpc .pacto.evaluator.v1.Evaluator.Evaluate removed"]
    );

    let streaming = after(|ix| {
        ix.service("Evaluator").method[0].server_streaming = Some(true);
    });
    assert!(
        streaming.len() == 1 && streaming[0].contains("returns (stream "),
        "{streaming:?}"
    );

    let message_gone = after(|ix| {
        for f in &mut ix.0.file {
            f.message_type.retain(|m| m.name() != "ObserveRequest");
        }
    });
    assert!(
        message_gone.contains(&"message .pacto.observer.v1.ObserveRequest removed".to_owned()),
        "{message_gone:?}"
    );
}

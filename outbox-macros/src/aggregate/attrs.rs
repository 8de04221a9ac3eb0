//! Parsing the struct's `#[aggregate(...)]` attributes.

use syn::meta::ParseNestedMeta;
use syn::{DeriveInput, Expr, LitStr, Path, Type};

use crate::attrs::{key_of, set_once, string_value};

const KEYS: &str = "`type`, `crate`, `entity`, `version_column`";

/// Longest accepted aggregate type, in bytes: the width of the outbox
/// table's `aggregate_type` column.
const MAX_AGGREGATE_TYPE_LEN: usize = 128;

/// The parsed, validated `#[aggregate(...)]` attributes of the struct.
pub(crate) struct AggregateAttrs {
    pub(crate) aggregate_type: LitStr,
    pub(crate) krate: Option<Path>,
    /// `entity` and `version_column`: the struct is a SeaORM model that is
    /// its own aggregate, so `AggregateEntity` is derived too.
    pub(crate) entity: Option<EntityAttrs>,
}

/// `#[aggregate(entity = "Entity", version_column = "Column::Version")]`.
pub(crate) struct EntityAttrs {
    /// The entity's type, as written.
    pub(crate) entity: Type,
    /// The literal it was parsed from, for spans.
    pub(crate) entity_lit: LitStr,
    /// The version column, an expression such as `Column::Version`.
    pub(crate) version_column: Expr,
}

#[derive(Default)]
struct Collected {
    aggregate_type: Option<LitStr>,
    krate: Option<Path>,
    entity: Option<(LitStr, Type)>,
    version_column: Option<(LitStr, Expr)>,
}

pub(crate) fn parse(input: &DeriveInput) -> syn::Result<AggregateAttrs> {
    let mut collected = Collected::default();
    for attr in input
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("aggregate"))
    {
        attr.parse_nested_meta(|meta| parse_key(&meta, &mut collected))?;
    }
    let Some(aggregate_type) = collected.aggregate_type else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "missing `#[aggregate(type = \"...\")]`: the aggregate type is stored on every \
             message and is never derived from the Rust type name",
        ));
    };
    let entity = match (collected.entity, collected.version_column) {
        (None, None) => None,
        (Some((entity_lit, entity)), Some((_, version_column))) => Some(EntityAttrs {
            entity,
            entity_lit,
            version_column,
        }),
        (Some((lit, _)), None) => {
            return Err(syn::Error::new(
                lit.span(),
                "`entity` needs `version_column` too, e.g. \
                 `#[aggregate(entity = \"Entity\", version_column = \"Column::Version\")]`",
            ));
        }
        (None, Some((lit, _))) => {
            return Err(syn::Error::new(
                lit.span(),
                "`version_column` needs `entity` too, e.g. \
                 `#[aggregate(entity = \"Entity\", version_column = \"Column::Version\")]`",
            ));
        }
    };
    Ok(AggregateAttrs {
        aggregate_type,
        krate: collected.krate,
        entity,
    })
}

fn parse_key(meta: &ParseNestedMeta<'_>, out: &mut Collected) -> syn::Result<()> {
    let key = key_of(meta);
    match key.as_str() {
        "type" => {
            let lit = string_value(meta, "type = \"order\"")?;
            check_aggregate_type(&lit.value()).map_err(|reason| {
                syn::Error::new(lit.span(), format!("invalid aggregate type: it {reason}"))
            })?;
            set_once(meta, &mut out.aggregate_type, lit)
        }
        "crate" => {
            let lit = string_value(meta, "crate = \"my_crate::txoutbox\"")?;
            let path = lit.parse::<Path>()?;
            set_once(meta, &mut out.krate, path)
        }
        "entity" => {
            let lit = string_value(meta, "entity = \"Entity\"")?;
            let ty = lit.parse::<Type>()?;
            set_once(meta, &mut out.entity, (lit, ty))
        }
        "version_column" => {
            let lit = string_value(meta, "version_column = \"Column::Version\"")?;
            let expr = lit.parse::<Expr>()?;
            set_once(meta, &mut out.version_column, (lit, expr))
        }
        "id" | "events" => Err(meta.error(format!(
            "`{key}` marks a field, not the struct: put `#[aggregate({key})]` on the field"
        ))),
        _ => Err(meta.error(format!(
            "unknown `aggregate` attribute key on the struct; expected one of {KEYS} \
             (fields take `id` and `events`)"
        ))),
    }
}

/// outbox-core has no run-time rule for aggregate types; these are the
/// limits the outbox table and the message headers impose.
fn check_aggregate_type(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        return Err("is empty");
    }
    if value.len() > MAX_AGGREGATE_TYPE_LEN {
        return Err("is longer than 128 bytes (the outbox's `aggregate_type` column)");
    }
    if value.chars().any(char::is_control) {
        return Err("contains a control character (it is sent as a message header)");
    }
    Ok(())
}

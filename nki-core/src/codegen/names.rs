//! Every `nki` / `nl` / `nisa` name codegen may emit, with the keywords it may pass and the NKI
//! 0.7 (Neuron SDK 2.33) documentation page for it. The table is derived from the declarations
//! (`nki_spec`) and the IR: every implemented instruction and every `nl` function with its
//! signature's keywords, every `nisa` enum variant, every dtype, the operators and activation
//! functions the IR has, and the buffers codegen allocates in (every one but the `hbm` alias); only
//! [`BY_HAND`] is written here. A test holds generated code to it.

use std::borrow::Cow;

use nki_spec::Status;

use crate::ir::{ActFn, BinOp};

/// One emitted name: `nisa.dma_copy`, `nl.affine_range`, `nl.add`, ...
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NkiName {
    /// The dotted name as emitted.
    pub name: Cow<'static, str>,
    /// Keyword arguments codegen may pass to it (empty for names it does not call with
    /// keywords).
    pub keywords: Vec<&'static str>,
    /// The NKI documentation page for it.
    pub doc: Cow<'static, str>,
}

/// The NKI 0.7 API reference pages.
const API: &str = "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated";

/// What no declaration lists: `nki.jit` and the tensor method `.ap(...)` (name, keywords,
/// page under [`API`]).
const BY_HAND: &[(&str, &[&str], &str)] = &[
    ("nki.jit", &[], "nki.jit.html"),
    (
        "ap",
        &["pattern", "offset"],
        "../../deep-dives/nki-aps.html",
    ),
];

/// The names codegen may emit (see the module doc).
pub fn emitted() -> Vec<NkiName> {
    let row = |name: String, keywords: Vec<&'static str>, file: String| NkiName {
        name: Cow::Owned(name),
        keywords,
        doc: Cow::Owned(format!("{API}/{file}")),
    };
    let language = |name: &str| format!("nki.language.{name}.html");
    let mut names: Vec<NkiName> = BY_HAND
        .iter()
        .map(|&(name, keywords, file)| row(name.into(), keywords.to_vec(), file.into()))
        .collect();
    for f in nki_spec::FUNCTIONS {
        let keywords = f.params.iter().map(|p| p.name).collect();
        names.push(row(format!("nl.{}", f.name), keywords, language(f.name)));
    }
    let plain = BinOp::ALL.iter().map(|o| o.nl_name());
    let plain = plain
        .chain(ActFn::ALL.iter().map(|f| f.nl_name()))
        .chain(nki_spec::DTYPES.iter().map(|d| d.name))
        .chain(
            (nki_spec::BUFFERS.iter())
                .filter(|b| b.alias_of.is_none())
                .map(|b| b.name),
        );
    for name in plain {
        if !names
            .iter()
            .any(|n| n.name.strip_prefix("nl.") == Some(name))
        {
            names.push(row(format!("nl.{name}"), vec![], language(name)));
        }
    }
    for spec in nki_spec::INSTRUCTIONS {
        if spec.status == Status::Implemented {
            let keywords = spec.params.iter().map(|p| p.name).collect();
            let file = format!("nki.isa.{}.html", spec.name);
            names.push(row(format!("nisa.{}", spec.name), keywords, file));
        }
    }
    for spec in nki_spec::ENUMS {
        for variant in spec.variants {
            let name = format!("nisa.{}.{}", spec.name, variant.name);
            names.push(row(name, vec![], format!("nki.isa.{}.html", spec.name)));
        }
    }
    names
}

//! Every `nki` / `nl` / `nisa` name codegen may emit, with the keywords it may pass and the NKI
//! 0.7 (Neuron SDK 2.33) documentation page for it. The table is derived from the declarations
//! (`nki_spec`): every implemented instruction with its signature's keywords, every enum variant,
//! every `nki.language` name; only the language constructs codegen calls with keywords
//! ([`CALLED_WITH_KEYWORDS`]) and `nki.jit` are written here. A test holds generated code to it.

use std::borrow::Cow;

use nki_spec::Status;

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

/// Names codegen calls with keywords that no declaration lists (the keywords are NKI's): the
/// name, its keywords, and its page when it is not `nki.language.<name>`'s.
const CALLED_WITH_KEYWORDS: &[(&str, &[&str], Option<&str>)] = &[
    ("nki.jit", &[], Some("nki.jit.html")),
    ("nl.ndarray", &["dtype", "buffer"], None),
    ("nl.shared_constant", &["dtype"], None),
    (
        "ap",
        &["pattern", "offset"],
        Some("../../deep-dives/nki-aps.html"),
    ),
];

/// The names codegen may emit (see the module doc).
pub fn emitted() -> Vec<NkiName> {
    let page = |file: String| Cow::Owned(format!("{API}/{file}"));
    let mut names: Vec<NkiName> = CALLED_WITH_KEYWORDS
        .iter()
        .map(|&(name, keywords, file)| NkiName {
            name: Cow::Borrowed(name),
            keywords: keywords.to_vec(),
            doc: page(file.map_or_else(
                || format!("nki.language.{}.html", name.trim_start_matches("nl.")),
                str::to_string,
            )),
        })
        .collect();
    for (name, _) in nki_spec::language::names() {
        if !names
            .iter()
            .any(|n| n.name.strip_prefix("nl.") == Some(name))
        {
            names.push(NkiName {
                name: Cow::Owned(format!("nl.{name}")),
                keywords: vec![],
                doc: page(format!("nki.language.{name}.html")),
            });
        }
    }
    for spec in nki_spec::INSTRUCTIONS {
        if spec.status == Status::Implemented {
            names.push(NkiName {
                name: Cow::Owned(format!("nisa.{}", spec.name)),
                keywords: spec.params.iter().map(|p| p.name).collect(),
                doc: page(format!("nki.isa.{}.html", spec.name)),
            });
        }
    }
    for spec in nki_spec::ENUMS {
        for variant in spec.variants {
            names.push(NkiName {
                name: Cow::Owned(format!("nisa.{}.{}", spec.name, variant.name)),
                keywords: vec![],
                doc: page(format!("nki.isa.{}.html", spec.name)),
            });
        }
    }
    names
}

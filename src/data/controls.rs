//! The control cases' names (ranking-over-scoring.md §3.2.2): systems that readers accept
//! without a bundle argument and that rankings treat apart. What each control's text is
//! and how it is made is the method's (`eval::controls`).

use serde::Serialize;

/// One kind of control case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    NoArgument,
    LabelOnly,
    Noise,
    IrPassages,
}

impl Control {
    pub const ALL: [Control; 4] = [Control::NoArgument, Control::LabelOnly, Control::Noise, Control::IrPassages];

    /// Every control's system name: the systems both front ends treat as control cases
    /// unless told otherwise (`--control-systems`, the page's Controls field).
    pub fn all_names() -> Vec<String> {
        Control::ALL.iter().map(|c| c.system_name().to_string()).collect()
    }

    /// The system name the control gets in the bundle (and in predictions).
    pub fn system_name(self) -> &'static str {
        match self {
            Control::NoArgument => "no_argument",
            Control::LabelOnly => "label_only",
            Control::Noise => "noise",
            Control::IrPassages => "ir_passages",
        }
    }
    pub fn parse(name: &str) -> Option<Control> {
        Control::ALL.into_iter().find(|c| c.system_name() == name)
    }
    /// Whether a system name is one of the control systems.
    pub fn is_control_name(system: &str) -> bool {
        Control::parse(system).is_some()
    }
}

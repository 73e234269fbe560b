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
    /// The control a name stands for, however it is spelled: case, `_`, `-` and spaces
    /// aside (the published files' `Label_Only`, `IR_Passages`, `No_Argument`).
    pub fn of_name(name: &str) -> Option<Control> {
        let squeezed: String = name.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect();
        Control::ALL.into_iter().find(|c| c.system_name().replace('_', "") == squeezed)
    }
    /// Whether a system name is one of the control systems.
    pub fn is_control_name(system: &str) -> bool {
        Control::parse(system).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_is_recognised_however_the_published_files_spell_it() {
        // The Ranking-Over-Scoring files' names (en.test_casimedicos_Label_Only.jsonl, ...).
        assert_eq!(Control::of_name("Label_Only"), Some(Control::LabelOnly));
        assert_eq!(Control::of_name("IR_Passages"), Some(Control::IrPassages));
        assert_eq!(Control::of_name("No_Argument"), Some(Control::NoArgument));
        assert_eq!(Control::of_name("no-argument"), Some(Control::NoArgument));
        assert_eq!(Control::of_name(" NOISE "), Some(Control::Noise));
        assert_eq!(Control::of_name("noise2"), None);
        assert_eq!(Control::of_name("gpt-4o"), None);
        // The exact name is still what readers and rankings key on.
        assert_eq!(Control::parse("Label_Only"), None);
    }
}

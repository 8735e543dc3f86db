//! `--output text|json` as clap reads it: [`OutputFormat`] lives in `output` (below the
//! commands, where no clap type may be named), and its command-line values are defined
//! here, where clap belongs. The values and their help are what `#[derive(ValueEnum)]` on
//! the type gave (`dwctl --help` unchanged).

use clap::ValueEnum;
use clap::builder::PossibleValue;

use crate::output::OutputFormat;

impl ValueEnum for OutputFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &[OutputFormat::Text, OutputFormat::Json]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            OutputFormat::Text => PossibleValue::new("text").help("Lines for people"),
            OutputFormat::Json => PossibleValue::new("json")
                .help("One JSON document (long-running commands: one JSON object per line)"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_has_its_value_and_parses_back() {
        for format in OutputFormat::value_variants() {
            let value = format.to_possible_value().unwrap();
            assert_eq!(OutputFormat::from_str(value.get_name(), false), Ok(*format));
        }
        assert_eq!(
            OutputFormat::from_str("json", false),
            Ok(OutputFormat::Json)
        );
        assert!(OutputFormat::from_str("xml", false).is_err());
    }
}

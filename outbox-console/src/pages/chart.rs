//! The publish-rate chart: an inline SVG bar per minute (no script, no
//! image request), with a text equivalent for screen readers.

use maud::{Markup, html};

const WIDTH: u32 = 600;
const HEIGHT: u32 = 120;
const AXIS: u32 = 16;

/// Bars of `per_minute` (the current minute first, drawn rightmost).
pub(crate) fn publish_rate(per_minute: &[u64]) -> Markup {
    let peak = per_minute.iter().copied().max().unwrap_or(0).max(1);
    let total: u64 = per_minute.iter().sum();
    let n = u32::try_from(per_minute.len()).unwrap_or(u32::MAX).max(1);
    let slot = WIDTH / n;
    let plot = HEIGHT - AXIS;
    let summary = format!(
        "{total} message(s) published in the last {} minutes; at most {} in one minute; {} this minute so far.",
        per_minute.len(),
        per_minute.iter().copied().max().unwrap_or(0),
        per_minute.first().copied().unwrap_or(0)
    );
    html! {
        figure {
            svg.chart viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" aria-labelledby="rate-title rate-desc" {
                title #rate-title { "Messages published per minute" }
                desc #rate-desc { (summary) }
                line x1="0" y1=(plot) x2=(WIDTH) y2=(plot) {}
                @for (i, count) in per_minute.iter().enumerate() {
                    @let index = u32::try_from(i).unwrap_or(0);
                    @let height = u32::try_from(u64::from(plot - 4) * count / peak).unwrap_or(0).max(u32::from(*count > 0));
                    @let x = WIDTH - (index + 1) * slot + 1;
                    rect.bar x=(x) y=(plot - height) width=(slot.saturating_sub(2).max(1)) height=(height) {
                        title { (count) " published " (if index == 0 { "this minute".to_owned() } else { format!("{index} min ago") }) }
                    }
                }
                text x="0" y=(HEIGHT - 3) { (per_minute.len()) " min ago" }
                text x=(WIDTH) y=(HEIGHT - 3) text-anchor="end" { "now" }
                text x="2" y="10" { "peak " (peak) "/min" }
            }
            figcaption { (summary) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bar_a_minute_and_a_text_equivalent() {
        let svg = publish_rate(&[3, 0, 10]).into_string();
        assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
        assert!(
            svg.contains("13 message(s) published in the last 3 minutes"),
            "{svg}"
        );
        assert!(!svg.contains("style="), "no inline style (CSP): {svg}");
    }
}

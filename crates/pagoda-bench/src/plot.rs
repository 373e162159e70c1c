//! SVG plots: latency CDFs per load level, throughput and latency across a sweep, and
//! latency and SLO attainment against the request rate for the goodput search.

use crate::error::BenchError;
use crate::metrics::empirical_cdf;
use crate::report::{LatencySamples, RunReport};
use plotters::prelude::*;
use std::path::Path;

/// One load level's label and its latency samples.
pub struct CdfSeries<'a> {
    pub label: String,
    pub samples: &'a LatencySamples,
}

fn plot_error(path: &Path, error: impl std::fmt::Display) -> BenchError {
    BenchError::Plot {
        path: path.to_owned(),
        message: error.to_string(),
    }
}

/// Selects one latency's samples.
type SamplePicker = fn(&LatencySamples) -> &[f64];

/// Writes TTFT, TPOT and end-to-end CDFs side by side, one line per load level.
pub fn write_latency_cdfs(path: &Path, series: &[CdfSeries]) -> Result<(), BenchError> {
    let root = SVGBackend::new(path, (1500, 450)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_error(path, e))?;
    let panels = root.split_evenly((1, 3));
    let pickers: [(&str, SamplePicker); 3] = [
        ("TTFT (ms)", |s| &s.ttft),
        ("TPOT (ms)", |s| &s.tpot),
        ("End-to-end latency (ms)", |s| &s.e2e),
    ];
    for (panel, (title, pick)) in panels.iter().zip(pickers) {
        let x_max = series
            .iter()
            .flat_map(|s| pick(s.samples).iter().copied())
            .fold(0.0_f64, f64::max)
            .max(1e-3)
            * 1.05;
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("CDF of {title}"), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..x_max, 0.0..1.0)
            .map_err(|e| plot_error(path, e))?;
        chart
            .configure_mesh()
            .x_desc(title)
            .y_desc("fraction of requests")
            .draw()
            .map_err(|e| plot_error(path, e))?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(empirical_cdf(pick(s.samples)), color))
                .map_err(|e| plot_error(path, e))?
                .label(s.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| plot_error(path, e))?;
    }
    root.present().map_err(|e| plot_error(path, e))
}

type Metric = (&'static str, fn(&RunReport) -> f64);

/// Writes throughput and latency against the offered load of a sweep.
pub fn write_sweep(path: &Path, runs: &[RunReport], x_label: &str) -> Result<(), BenchError> {
    let root = SVGBackend::new(path, (1500, 450)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_error(path, e))?;
    let panels = root.split_evenly((1, 3));
    let requests: [Metric; 2] = [
        ("requests/s", |r| r.request_throughput),
        ("goodput requests/s", |r| r.goodput),
    ];
    let tokens: [Metric; 2] = [
        ("output tokens/s", |r| r.output_token_throughput),
        ("input tokens/s", |r| r.input_token_throughput),
    ];
    let latency: [Metric; 4] = [
        ("TTFT p50 (ms)", |r| r.ttft_ms.median),
        ("TTFT p99 (ms)", |r| r.ttft_ms.p99),
        ("TPOT p50 (ms)", |r| r.tpot_ms.median),
        ("TPOT p99 (ms)", |r| r.tpot_ms.p99),
    ];
    draw_metric_panel(
        path,
        &panels[0],
        "Request throughput",
        x_label,
        runs,
        &requests,
    )?;
    draw_metric_panel(path, &panels[1], "Token throughput", x_label, runs, &tokens)?;
    draw_metric_panel(path, &panels[2], "Latency", x_label, runs, &latency)?;
    root.present().map_err(|e| plot_error(path, e))
}

/// Writes TTFT, per-request ITL (time per output token) and SLO attainment against the
/// request rate of each run of a goodput search; `runs` must be in increasing rate.
pub fn write_goodput_curves(path: &Path, runs: &[RunReport]) -> Result<(), BenchError> {
    let root = SVGBackend::new(path, (1500, 450)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_error(path, e))?;
    let panels = root.split_evenly((1, 3));
    let ttft: [Metric; 2] = [
        ("TTFT p50 (ms)", |r| r.ttft_ms.median),
        ("TTFT p99 (ms)", |r| r.ttft_ms.p99),
    ];
    let itl: [Metric; 2] = [
        ("ITL p50 (ms)", |r| r.tpot_ms.median),
        ("ITL p99 (ms)", |r| r.tpot_ms.p99),
    ];
    let attainment: [Metric; 1] = [("fraction meeting the SLO", RunReport::slo_attainment)];
    let x_label = "request rate (req/s)";
    draw_metric_panel(
        path,
        &panels[0],
        "Time to first token",
        x_label,
        runs,
        &ttft,
    )?;
    draw_metric_panel(
        path,
        &panels[1],
        "Time per output token",
        x_label,
        runs,
        &itl,
    )?;
    draw_metric_panel(
        path,
        &panels[2],
        "SLO attainment",
        x_label,
        runs,
        &attainment,
    )?;
    root.present().map_err(|e| plot_error(path, e))
}

fn draw_metric_panel(
    path: &Path,
    panel: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    title: &str,
    x_label: &str,
    runs: &[RunReport],
    metrics: &[Metric],
) -> Result<(), BenchError> {
    let x_max = runs.iter().map(|r| r.load.level()).fold(0.0, f64::max) * 1.05 + 1e-9;
    let y_max = runs
        .iter()
        .flat_map(|r| metrics.iter().map(move |(_, f)| f(r)))
        .fold(0.0, f64::max)
        * 1.1
        + 1e-9;
    let mut chart = ChartBuilder::on(panel)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| plot_error(path, e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .draw()
        .map_err(|e| plot_error(path, e))?;
    for (i, (name, value)) in metrics.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = runs.iter().map(|r| (r.load.level(), value(r))).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color))
            .map_err(|e| plot_error(path, e))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        chart
            .draw_series(PointSeries::of_element(points, 3, color, &|c, s, st| {
                Circle::new(c, s, st.filled())
            }))
            .map_err(|e| plot_error(path, e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| plot_error(path, e))?;
    Ok(())
}

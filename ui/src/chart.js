// Charts of the dashboard's pages: uPlot (bundled with weftd, loaded as window.uPlot).

function short(v) {
  if (v === null || v === undefined) return "";
  const a = Math.abs(v);
  if (a >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
  if (a >= 1e3) return +(v / 1e3).toPrecision(3) + "k";
  return +v.toPrecision(3) + "";
}

// A chart of series over x (the training step unless `options.x` names another axis): uPlot
// (bundled) in `node`; update(xs, ...ys). `options.logX` puts x on a log scale; `options.dots`
// draws each series as points without lines (a scatter; xs sorted ascending).
export function chart(node, title, series, options = {}) {
  let plot = null;
  let data = null;
  const make = () => {
    if (plot || !window.uPlot || !node.isConnected) return;
    plot = new window.uPlot(
      {
        title,
        width: Math.max(280, node.clientWidth || 400),
        height: 220,
        scales: { x: options.logX ? { time: false, distr: 3 } : { time: false } },
        // y labels short enough for the axis: 35k rather than a clipped 35,000
        axes: [{ label: options.x || "step" }, { size: 56, values: (u, ticks) => ticks.map(short) }],
        series: [{ label: options.x || "step" }].concat(
          series.map((s) =>
            Object.assign(
              options.dots
                ? { paths: () => null, points: { show: true, size: 7 } }
                : { spanGaps: true, width: 1.5 },
              s,
            ),
          ),
        ),
      },
      data || [[], ...series.map(() => [])],
      node,
    );
  };
  return {
    update(xs, ...ys) {
      data = [xs, ...ys];
      node.dataset.points = String(xs.length);
      make();
      if (plot) plot.setData(data);
    },
    resize() {
      if (plot) plot.setSize({ width: Math.max(280, node.clientWidth), height: 220 });
    },
    destroy() {
      if (plot) plot.destroy();
    },
  };
}

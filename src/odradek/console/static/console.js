// Live charts: every [data-chart="a,b"] element draws those history series with uPlot and
// refreshes them from /api/series at the page's refresh interval.
(function () {
  const refresh = parseInt(document.body.dataset.refreshMs || "2000", 10);
  const colors = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00"];

  function merge(names, data) {
    // one shared time axis: the union of the series' timestamps
    const times = [...new Set(names.flatMap(n => (data[n] || [[], []])[0]))].sort((a, b) => a - b);
    const cols = names.map(n => {
      const [ts, vs] = data[n] || [[], []];
      const at = new Map(ts.map((t, i) => [t, vs[i]]));
      return times.map(t => (at.has(t) ? at.get(t) : null));
    });
    return [times, ...cols];
  }

  function setup(el) {
    const names = el.dataset.chart.split(",");
    const opts = {
      width: Math.min(el.clientWidth || 900, 900), height: 200,
      series: [{}, ...names.map((n, i) => ({ label: n, stroke: colors[i % colors.length], spanGaps: true }))],
      axes: [{}, { label: el.dataset.unit || "" }],
    };
    const plot = new uPlot(opts, merge(names, {}), el);
    async function load() {
      const q = names.map(n => "name=" + encodeURIComponent(n)).join("&");
      try {
        const r = await fetch("/api/series?" + q);
        if (r.ok) { plot.setData(merge(names, await r.json())); el.dataset.points = plot.data[0].length; }
      } catch (e) { /* the next tick tries again */ }
    }
    load();
    setInterval(() => { if (document.visibilityState === "visible") load(); }, refresh);
  }

  document.querySelectorAll("[data-chart]").forEach(setup);
})();

// Pagoda console: redraws the engine charts from /ui/api/engine every two seconds. No
// libraries, no requests anywhere but this server.
(function () {
  "use strict";
  var charts = document.querySelectorAll(".chart[data-series]");
  if (!charts.length) return;
  var colours = ["#3b82f6", "#f59e0b"];
  var NS = "http://www.w3.org/2000/svg";

  function fmt(v, unit) {
    if (v === null || v === undefined) return "-";
    if (unit === "%") return (v * 100).toFixed(1) + "%";
    if (unit === "s") return v < 1 ? (v * 1000).toFixed(0) + " ms" : v.toFixed(2) + " s";
    if (unit === "/s") return v.toFixed(1) + "/s";
    return String(Math.round(v * 10) / 10);
  }

  function draw(chart, samples) {
    var svg = chart.querySelector("svg");
    var names = chart.dataset.series.split(",");
    var unit = chart.dataset.unit;
    var max = unit === "%" ? 1 : 0;
    samples.forEach(function (s) {
      names.forEach(function (n) { if (s[n] !== null && s[n] > max) max = s[n]; });
    });
    if (max === 0) max = 1;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var t0 = samples.length ? samples[0].t_ms : 0;
    var span = samples.length > 1 ? samples[samples.length - 1].t_ms - t0 : 1;
    names.forEach(function (n, i) {
      var points = [];
      samples.forEach(function (s) {
        if (s[n] === null || s[n] === undefined) return;
        var x = ((s.t_ms - t0) / span) * 300;
        var y = 116 - (s[n] / max) * 110;
        points.push(x.toFixed(1) + "," + y.toFixed(1));
      });
      var line = document.createElementNS(NS, "polyline");
      line.setAttribute("points", points.join(" "));
      line.setAttribute("fill", "none");
      line.setAttribute("stroke", colours[i % colours.length]);
      line.setAttribute("stroke-width", "2");
      line.setAttribute("vector-effect", "non-scaling-stroke");
      line.setAttribute("data-name", n);
      svg.appendChild(line);
    });
    var last = samples[samples.length - 1];
    var text = last ? names.map(function (n) { return n.replace(/_/g, " ") + " " + fmt(last[n], unit); }).join(" · ") : "waiting for samples";
    chart.querySelector(".value").textContent = text + " (max " + fmt(max, unit) + ")";
    chart.dataset.samples = String(samples.length);
  }

  function refresh() {
    fetch("/ui/api/engine", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (data) {
        charts.forEach(function (c) { draw(c, data.samples); });
        var last = data.samples[data.samples.length - 1];
        var pre = document.getElementById("preemptions");
        if (pre && last) pre.textContent = String(last.preemptions);
        var upd = document.getElementById("updated");
        if (upd) upd.textContent = new Date().toLocaleTimeString();
      })
      .catch(function () {
        var upd = document.getElementById("updated");
        if (upd) upd.textContent = "failed; retrying";
      });
  }
  refresh();
  setInterval(refresh, 2000);
})();

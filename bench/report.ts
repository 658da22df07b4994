/** Turns BenchResults into the console table and bench/results.md. */
import type { BenchResults, SizeResult } from "./results-types.ts";
import type { Distribution } from "./stats.ts";

type Cell = string | number;

function fmtUs(value: number): string {
  if (!Number.isFinite(value)) return "n/a";
  if (value >= 10_000) return `${(value / 1000).toFixed(1)} ms`;
  if (value >= 1000) return `${(value / 1000).toFixed(2)} ms`;
  if (value >= 10) return `${value.toFixed(1)} µs`;
  return `${value.toFixed(2)} µs`;
}

function fmtMsFromUs(value: number): string {
  return Number.isFinite(value) ? `${(value / 1000).toFixed(1)} ms` : "n/a";
}

function pair(d: Distribution | undefined): string {
  if (!d || d.n === 0) return "n/a";
  // A percentile of a handful of samples means nothing: show the value and the count instead.
  if (d.n < 20) return `${fmtUs(d.p50)} (n=${d.n})`;
  return `${fmtUs(d.p50)} / ${fmtUs(d.p99)}`;
}

function bytes(value: number): string {
  return value >= 1e6 ? `${(value / 1e6).toFixed(1)} MB` : `${(value / 1e3).toFixed(0)} KB`;
}

function ratio(value: number): string {
  if (!Number.isFinite(value)) return "n/a";
  return value >= 100 ? `${Math.round(value).toLocaleString("en-US")}x` : `${value.toFixed(1)}x`;
}

function count(value: number): string {
  return value.toLocaleString("en-US");
}

function markdownTable(header: Cell[], rows: Cell[][]): string {
  const line = (cells: Cell[]) => `| ${cells.map(String).join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

function consoleTable(header: Cell[], rows: Cell[][]): string {
  const all = [header, ...rows].map((row) => row.map(String));
  const widths = header.map((_, i) => Math.max(...all.map((row) => (row[i] ?? "").length)));
  const line = (row: string[]) => row.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join("  ");
  return [line(all[0] ?? []), widths.map((w) => "-".repeat(w)).join("  "), ...all.slice(1).map(line)].join("\n");
}

function warmRows(sizes: readonly SizeResult[]): { header: Cell[]; rows: Cell[][] } {
  const header = [
    "files",
    "touched",
    "before new p50/p99",
    "before repeat p50/p99",
    "1st transform",
    "warm p50",
    "warm p99",
    "step after tool p50/p99",
    "naive (a) p50 [n]",
    "stat (b) p50 [n]",
    "(a)/ours",
    "(b)/ours",
    "block tokens",
    "files shown",
    "compaction p50 / tokens",
  ];
  const rows: Cell[][] = [];
  for (const size of sizes) {
    const touchedLevels = new Set([...size.warm.map((w) => w.touchedDirs), ...size.baselines.map((b) => b.touchedDirs)]);
    for (const touched of [...touchedLevels].sort((a, b) => a - b)) {
      const warm = size.warm.find((w) => w.touchedDirs === touched);
      const naive = size.baselines.find((b) => b.touchedDirs === touched && b.loader === "naive");
      const stat = size.baselines.find((b) => b.touchedDirs === touched && b.loader === "stat-cache");
      const r = size.ratios.find((x) => x.touchedDirs === touched);
      rows.push([
        count(size.contextFiles),
        count(touched),
        pair(warm?.newTouch),
        pair(warm?.repeatTouch),
        warm ? `${warm.firstTransformMs.toFixed(1)} ms` : "n/a",
        warm ? fmtUs(warm.warm.p50) : "n/a",
        warm ? fmtUs(warm.warm.p99) : "n/a",
        pair(warm?.stepAfterTool),
        naive ? `${fmtUs(naive.perMessage.p50)} [${naive.perMessage.n}]` : "n/a",
        stat ? `${fmtUs(stat.perMessage.p50)} [${stat.perMessage.n}]` : "n/a",
        r ? ratio(r.naiveOverOurs) : "n/a",
        r ? ratio(r.statCacheOverOurs) : "n/a",
        warm ? count(warm.blockTokens) : "n/a",
        warm ? `${warm.chainFilesShown}/${warm.chainContextFiles}` : "n/a",
        warm ? `${fmtUs(warm.compaction.p50)} / ${count(warm.compactionTokens)}` : "n/a",
      ]);
    }
  }
  return { header, rows };
}

export function consoleReport(results: BenchResults): string {
  const { header, rows } = warmRows(results.sizes);
  const lines = [consoleTable(header, rows), ""];
  for (const size of results.sizes) {
    const parts: string[] = [`[${count(size.contextFiles)} files]`];
    if (size.coldChain) parts.push(`cold 10-level chain ${pair(size.coldChain.total)}`);
    if (size.incrementalCold) parts.push(`new dir in warm session ${pair(size.incrementalCold.total)}`);
    const compaction = size.warm.find((w) => w.touchedDirs === 200) ?? size.warm[size.warm.length - 1];
    if (compaction) parts.push(`compaction ${pair(compaction.compaction)}`);
    if (size.startup) parts.push(`start-up ${fmtMsFromUs(size.startup.child.ready.p50)} (init ${fmtUs(size.startup.child.init.p50)})`);
    if (size.freshness) {
      const f = size.freshness;
      parts.push(`fresh p50/p95 edit ${fmtMsFromUs(f.edit.latency.p50)}/${fmtMsFromUs(f.edit.latency.p95)} create ${fmtMsFromUs(f.create.latency.p50)}/${fmtMsFromUs(f.create.latency.p95)}`);
    }
    const point = size.memory?.points[size.memory.points.length - 1];
    if (point) {
      const dirs = point.watches ? point.watches.onTouchedChains + point.watches.otherDirectories + point.watches.unknown : NaN;
      parts.push(`RSS +${point.rssGrowthMB.toFixed(1)} MB @${count(point.touchedDirs)} dirs, watched dirs ${dirs}/${point.chainDirs} chain dirs`);
    }
    if (size.session) parts.push(`session: ${size.session.identicalToPrevious}/${size.session.requests - 1} requests byte-identical`);
    if (size.errors.length > 0) parts.push(`ERRORS: ${size.errors.join(" | ")}`);
    lines.push(parts.join(" · "));
  }
  lines.push("", "Targets:");
  for (const target of results.targets) {
    const mark = target.pass === null ? "n/a " : target.pass ? "PASS" : "MISS";
    lines.push(`  ${mark}  ${target.name} (${target.goal}): ${target.measured}`);
  }
  return lines.join("\n");
}

export function markdownReport(results: BenchResults): string {
  const out: string[] = [];
  const m = results.machine;
  out.push("# Benchmark results", "");
  out.push(`Generated by \`npm run bench\` (bench/run.ts) on ${results.date}, ${results.durationSeconds.toFixed(0)} s in all.`, "");
  out.push(
    `- Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB.toFixed(1)} GiB RAM, ${m.os}; load average ${m.loadAverageStart.map((x) => x.toFixed(2)).join(" ")} at start, ${m.loadAverageEnd.map((x) => x.toFixed(2)).join(" ")} at end (shared, noisy machine: medians and percentiles, ratios taken within the same run).`,
    `- Versions: ${Object.entries(results.versions).map(([k, v]) => `${k} ${v}`).join(", ")}.`,
    `- Plugin: ${results.plugin.available ? `\`${results.plugin.path}\`, sources sha256 ${results.plugin.sourceHash ?? "?"}` : "NOT AVAILABLE (baselines only)"}.`,
    `- Settings: seed ${results.settings.seed}, sizes ${results.settings.sizes.join(", ")}${results.settings.quick ? ", QUICK mode (reduced iterations)" : ""}; plugin options left at their defaults.`,
    "",
  );

  out.push("## Targets", "");
  out.push(
    markdownTable(
      ["target", "goal", "measured", "result"],
      results.targets.map((t) => [t.name, t.goal, t.measured, t.pass === null ? "not measured" : t.pass ? "PASS" : "**MISS**"]),
    ),
    "",
  );

  out.push("## Trees", "");
  out.push(
    markdownTable(
      ["context files", "dirs", "context bytes", "AGENTS.md / CLAUDE.md / dirs with both", "with frontmatter", "max / mean depth", "generated in (when first built)"],
      results.sizes.map((s) => [
        count(s.tree.contextFileCount),
        count(s.tree.dirCount),
        bytes(s.tree.contextBytes),
        `${count(s.tree.agentsFiles)} / ${count(s.tree.claudeFiles)} / ${count(s.tree.dirsWithBoth)}`,
        count(s.tree.withFrontmatter),
        `${s.tree.maxDepth} / ${s.tree.meanDirDepth.toFixed(1)}`,
        `${(s.tree.generationMs / 1000).toFixed(1)} s`,
      ]),
    ),
    "",
  );

  out.push("## Per message: the plugin's hooks and the baselines", "");
  out.push(
    "`before` = tool.execute.before (new: a directory the session had not touched; repeat: mixed read/edit/glob/bash/apply_patch on touched ones). " +
      "`1st transform` = first system transform after touching the whole set (everything loaded, tokenized, rendered). " +
      "`warm` = transform with nothing changed (the target). `step after tool` = transform of a step that follows a tool call + tool.execute.after (what most real steps are). " +
      "Baselines: (a) naive walk/re-read/re-merge every message, (b) stat-validated cache; [n] = samples (time-boxed). Ratios = baseline p50 / ours warm p50. " +
      "`files shown` = context files on the touched chains whose marker line appears in the block (the rest were left out for the 8,000-token budget; root excluded when OpenCode already injects it).",
    "",
  );
  const { header, rows } = warmRows(results.sizes);
  out.push(markdownTable(header, rows), "");

  out.push("## Cold paths, compaction, start-up", "");
  out.push(
    markdownTable(
      [
        "files",
        "cold 10-level chain p50/p99 (touch + 1st transform)",
        "of which transform p50",
        "deepest file shown",
        "new dir in a 200-dir session p50/p99",
        "compaction hook p50/p99 (200 dirs)",
        "compaction tokens",
        "tool.execute.after p50/p99 (200 dirs)",
        "start-up fresh process p50: import + init",
        "init in-process p50",
      ],
      results.sizes.map((s) => {
        const at200 = s.warm.find((w) => w.touchedDirs === 200);
        return [
          count(s.contextFiles),
          pair(s.coldChain?.total),
          s.coldChain ? fmtUs(s.coldChain.firstTransform.p50) : "n/a",
          s.coldChain ? `${s.coldChain.deepestShown}/${s.coldChain.samples}` : "n/a",
          pair(s.incrementalCold?.total),
          pair(at200?.compaction),
          at200 ? count(at200.compactionTokens) : "n/a",
          pair(at200?.toolAfter),
          s.startup
            ? `${fmtMsFromUs(s.startup.child.ready.p50)}: ${fmtMsFromUs(s.startup.child.import.p50)} + ${fmtUs(s.startup.child.init.p50)} (n=${s.startup.child.ready.n})`
            : "n/a",
          s.startup ? fmtUs(s.startup.inProcess.init.p50) : "n/a",
        ];
      }),
    ),
    "",
  );

  out.push("## Freshness (write → first transform carrying the new text)", "");
  out.push(
    "Polled with a 1 ms yield between transforms (resolution ~1 ms). `polls` = transforms per change until the new text showed, i.e. how many steps would still have carried the old text if every poll were a step; few polls with a long latency means the machine was starved, not that the plugin waited.",
    "",
  );
  out.push(
    markdownTable(
      ["files", "touched", "edit p50/p95 [n, never seen]", "create p50/p95", "delete p50/p95", "edit via agent's tool p50/p95", "polls p50/p95 (edit; create)", "created text shown / delete restored block", "note"],
      results.sizes
        .filter((s) => s.freshness)
        .map((s) => {
          const f = s.freshness!;
          const cell = (x: typeof f.edit) => `${fmtMsFromUs(x.latency.p50)} / ${fmtMsFromUs(x.latency.p95)} [${x.samples}, ${x.timeouts}]`;
          return [
            count(s.contextFiles),
            f.touchedDirs,
            cell(f.edit),
            cell(f.create),
            cell(f.delete),
            cell(f.agentEdit),
            `${f.edit.medianPolls}/${f.edit.p95Polls}; ${f.create.medianPolls}/${f.create.p95Polls}`,
            `${f.createdTextShown}/${f.create.samples} · ${f.deleteRestoredBlock}/${f.delete.samples}`,
            f.note ?? "",
          ];
        }),
    ),
    "",
  );

  out.push("## Memory and watches (separate process per size, after GC)", "");
  out.push(
    markdownTable(
      ["files", "touched", "RSS growth", "peak RSS growth while touching", "heap growth", "tokenizer RSS (fixed)", "module RSS", "dir watches (on chains / off chains / unidentified)", "chain dirs", "file watches", "watch set-up", "watches after dispose"],
      results.sizes.flatMap((s) =>
        (s.memory?.points ?? []).map((p) => [
          count(s.contextFiles),
          count(p.touchedDirs),
          `${p.rssGrowthMB.toFixed(1)} MB`,
          `${p.peakRssGrowthMB.toFixed(1)} MB`,
          `${p.heapGrowthMB.toFixed(1)} MB`,
          `${s.memory!.tokenizerRssMB.toFixed(1)} MB`,
          s.memory!.moduleRssMB < 1 ? "< 1 MB" : `${s.memory!.moduleRssMB.toFixed(1)} MB`,
          p.watches ? `${p.watches.onTouchedChains + p.watches.otherDirectories + p.watches.unknown} (${p.watches.onTouchedChains} / ${p.watches.otherDirectories} / ${p.watches.unknown})` : "n/a",
          count(p.chainDirs),
          p.watches ? count(p.watches.files) : "n/a",
          `${(p.settleMs / 1000).toFixed(1)} s`,
          s.memory!.watchesAfterDispose ?? "n/a",
        ]),
      ),
    ),
    "",
  );

  const diagnostic = results.sizes.filter((s) => s.memoryWithoutWatcher);
  if (diagnostic.length > 0) {
    out.push("Diagnostic, same probe with `{ watch: false }` (stat validation instead of the watcher), to attribute the growth:", "");
    out.push(
      markdownTable(
        ["files", "touched", "RSS growth", "peak RSS growth while touching", "heap growth"],
        diagnostic.flatMap((s) =>
          s.memoryWithoutWatcher!.points.map((p) => [count(s.contextFiles), count(p.touchedDirs), `${p.rssGrowthMB.toFixed(1)} MB`, `${p.peakRssGrowthMB.toFixed(1)} MB`, `${p.heapGrowthMB.toFixed(1)} MB`]),
        ),
      ),
      "",
    );
  }

  out.push("## Tokens and prompt-cache stability (scripted session)", "");
  out.push(
    "A seeded session of tasks over areas of the repo (0–3 tool calls per step, mostly on already-touched directories, one compaction half-way). " +
      "A request whose block differs from the previous one invalidates the provider's prompt cache from the block on. " +
      "`unavoidable` = changes on requests where the set of applicable context files grew.",
    "",
  );
  out.push(
    markdownTable(
      ["files", "requests", "tool calls", "dirs touched", "byte-identical to previous", "changed (unavoidable / other)", "prefix kept on change", "tokens per request p50 / max", "compaction context tokens"],
      results.sizes
        .filter((s) => s.session)
        .map((s) => {
          const x = s.session!;
          return [
            count(s.contextFiles),
            x.requests,
            x.toolCalls,
            x.touchedDirs,
            `${x.identicalToPrevious}/${x.requests - 1} (${((100 * x.identicalToPrevious) / Math.max(1, x.requests - 1)).toFixed(1)}%)`,
            `${x.changed} (${x.unavoidableChanges} / ${x.otherChanges})`,
            `${(100 * x.meanPrefixKept).toFixed(0)}%`,
            `${count(Math.round(x.tokensPerRequest.p50))} / ${count(Math.round(x.tokensPerRequest.max))}`,
            count(x.compactionContextTokens),
          ];
        }),
    ),
    "",
  );
  out.push("Uncapped, the baselines would inject (tokens, o200k_base; estimated at 4 chars/token past 400 KB):", "");
  out.push(
    markdownTable(
      ["files", ...(results.sizes[0]?.baselines.filter((b) => b.loader === "naive").map((b) => `${b.touchedDirs} dirs`) ?? [])],
      results.sizes.map((s) => [count(s.contextFiles), ...s.baselines.filter((b) => b.loader === "naive").map((b) => count(b.uncappedTokens))]),
    ),
    "",
  );

  if (results.pluginWarnings.length > 0) {
    out.push("## Plugin warnings logged during the run (grouped; first message of each kind)", "");
    for (const w of results.pluginWarnings) out.push(`- ${w.level} ×${w.count}: ${w.message}`);
    out.push("");
  }

  out.push("## Method", "");
  for (const note of results.notes) out.push(`- ${note}`);
  for (const size of results.sizes) {
    const iterations = Object.entries(size.iterations).map(([k, v]) => `${k} ${v}`).join(", ");
    out.push(`- ${count(size.contextFiles)} files: iterations ${iterations}.`);
    for (const error of size.errors) out.push(`- ${count(size.contextFiles)} files: ERROR ${error}`);
  }
  out.push("");
  return out.join("\n");
}

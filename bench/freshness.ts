/**
 * Freshness: time from a write on disk to the first system transform whose block carries the new
 * text. The transform is polled in a bounded loop with a 1 ms yield between polls, so watcher
 * events can be delivered; the resolution is therefore ~1 ms. Three kinds of change:
 * - edit: an external write to a context file already in the block (editor, git checkout);
 * - create: a new AGENTS.md in a touched directory that had none, then its deletion (signal: the
 *   block changed, since over budget the new file may be counted as omitted rather than shown);
 * - agent edit: the same edit made through the agent's own `edit` tool (tool.execute.after sees it).
 */
import type { Plugin } from "@opencode-ai/plugin";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TreeManifest } from "./generate.ts";
import { absDir, markTreeClean, markTreeDirty, sourceFileOf } from "./generate.ts";
import type { PluginSession } from "./host.ts";
import { startPlugin } from "./host.ts";
import type { Distribution } from "./stats.ts";
import { summarizeMs } from "./stats.ts";
import type { TouchPlan } from "./workload.ts";
import { chainDirIds, effectiveContextFiles, expectedInBlock } from "./workload.ts";

export interface FreshnessSeries {
  samples: number;
  /** Microseconds, like every Distribution. */
  latency: Distribution;
  /** Changes never seen within the timeout (counted out of the distribution, reported apart). */
  timeouts: number;
  /** Polls (transform calls) per sample, median: how many steps would have carried stale text. */
  medianPolls: number;
  /**
   * 95th percentile of polls. Small while the latency p95 is large means the time went to the
   * machine (CPU starved, 1 ms sleeps overshooting), not to the plugin waiting for an event.
   */
  p95Polls: number;
}

export interface FreshnessResult {
  touchedDirs: number;
  edit: FreshnessSeries;
  create: FreshnessSeries;
  delete: FreshnessSeries;
  agentEdit: FreshnessSeries;
  /** Creations whose text was in the block (the others were left out by the token budget). */
  createdTextShown: number;
  /** Deletions after which the block was byte-identical to the one before the creation. */
  deleteRestoredBlock: number;
  note?: string;
}

export interface FreshnessOptions {
  samples: number;
  touchedDirs: number;
  timeoutMs: number;
  fileNames: readonly string[];
  maxDepth: number;
}

async function pollUntil(session: PluginSession, startedMs: number, timeoutMs: number, seen: (block: string) => boolean) {
  let polls = 0;
  for (;;) {
    const block = await session.transform();
    polls++;
    const elapsed = performance.now() - startedMs;
    if (seen(block)) return { elapsed, polls, timedOut: false };
    if (elapsed > timeoutMs) return { elapsed, polls, timedOut: true };
    await Bun.sleep(1);
  }
}

function series(latencies: number[], polls: number[], timeouts: number): FreshnessSeries {
  const sortedPolls = polls.slice().sort((a, b) => a - b);
  return {
    samples: latencies.length + timeouts,
    latency: summarizeMs(latencies),
    timeouts,
    medianPolls: sortedPolls[Math.floor((sortedPolls.length - 1) / 2)] ?? 0,
    p95Polls: sortedPolls[Math.max(0, Math.ceil(0.95 * sortedPolls.length) - 1)] ?? 0,
  };
}

export async function measureFreshness(
  plugin: Plugin,
  manifest: TreeManifest,
  plan: TouchPlan,
  options: FreshnessOptions,
): Promise<FreshnessResult> {
  const instance = await startPlugin(plugin, manifest.root);
  const session = instance.session("ses_fresh");
  const dirIds = plan.order.slice(0, options.touchedDirs);
  for (const id of dirIds) await session.toolCall("read", { filePath: sourceFileOf(manifest, id) });
  const initialBlock = await session.transform();
  // Watchers are set up asynchronously after the first lookups; changes are measured from steady state.
  await Bun.sleep(300);
  await session.transform();

  const chainFiles = effectiveContextFiles(manifest, expectedInBlock(manifest, chainDirIds(manifest, dirIds, options.maxDepth)), options.fileNames);
  const editTargets = chainFiles.filter((file) => file.marker && initialBlock.includes(file.marker));
  const createTargets = dirIds.filter((id) => (manifest.dirs[id]?.contextFiles.length ?? 1) === 0);
  const originals = new Map(editTargets.map((file) => [file.path, readFileSync(file.path, "utf8")]));
  const notes: string[] = [];
  if (editTargets.length === 0) notes.push("no context file of the touched chains is visible in the block: edits not measured");
  if (createTargets.length === 0) notes.push("every touched directory already has a context file: creations not measured");

  markTreeDirty(manifest);
  const edit = { latencies: [] as number[], polls: [] as number[], timeouts: 0 };
  const agentEdit = { latencies: [] as number[], polls: [] as number[], timeouts: 0 };
  const create = { latencies: [] as number[], polls: [] as number[], timeouts: 0 };
  const deletion = { latencies: [] as number[], polls: [] as number[], timeouts: 0 };
  let createdTextShown = 0;
  let deleteRestoredBlock = 0;
  try {
    for (let i = 0; i < options.samples && editTargets.length > 0; i++) {
      const target = editTargets[i % editTargets.length];
      if (!target) break;
      const original = originals.get(target.path) ?? "";
      const token = `fresh-edit-${i}-${Math.random().toString(36).slice(2, 8)}`;
      const started = performance.now();
      writeFileSync(target.path, original.replace(target.marker, `${target.marker.trimEnd()} ${token}\n`));
      const outcome = await pollUntil(session, started, options.timeoutMs, (block) => block.includes(token));
      if (outcome.timedOut) edit.timeouts++;
      else edit.latencies.push(outcome.elapsed);
      edit.polls.push(outcome.polls);
      await Bun.sleep(5);
    }

    for (let i = 0; i < options.samples && editTargets.length > 0; i++) {
      const target = editTargets[i % editTargets.length];
      if (!target) break;
      const original = originals.get(target.path) ?? "";
      const token = `fresh-agent-${i}-${Math.random().toString(36).slice(2, 8)}`;
      const started = performance.now();
      writeFileSync(target.path, original.replace(target.marker, `${target.marker.trimEnd()} ${token}\n`));
      await session.toolCall("edit", { filePath: target.path, oldString: target.marker, newString: token });
      const outcome = await pollUntil(session, started, options.timeoutMs, (block) => block.includes(token));
      if (outcome.timedOut) agentEdit.timeouts++;
      else agentEdit.latencies.push(outcome.elapsed);
      agentEdit.polls.push(outcome.polls);
      await Bun.sleep(5);
    }

    for (let i = 0; i < options.samples && createTargets.length > 0; i++) {
      const dirId = createTargets[i % createTargets.length];
      if (dirId === undefined) break;
      const path = join(absDir(manifest, dirId), options.fileNames[0] ?? "AGENTS.md");
      const token = `fresh-new-${i}-${Math.random().toString(36).slice(2, 8)}`;
      const before = await session.transform();
      const created = performance.now();
      writeFileSync(path, `# New rules\n\n${token}\n\n- Prefer small modules.\n`);
      // A new file changes the block even when the budget leaves it out (the count of omitted
      // files grows), so "the block changed" is the signal; whether the text itself made it in
      // is counted apart.
      const seenCreate = await pollUntil(session, created, options.timeoutMs, (block) => block !== before);
      if (seenCreate.timedOut) create.timeouts++;
      else create.latencies.push(seenCreate.elapsed);
      create.polls.push(seenCreate.polls);
      const withFile = await session.transform();
      if (withFile.includes(token)) createdTextShown++;
      await Bun.sleep(5);
      const removed = performance.now();
      rmSync(path, { force: true });
      const seenDelete = await pollUntil(session, removed, options.timeoutMs, (block) => block !== withFile);
      if (seenDelete.timedOut) deletion.timeouts++;
      else deletion.latencies.push(seenDelete.elapsed);
      deletion.polls.push(seenDelete.polls);
      const after = await session.transform();
      if (after === before) deleteRestoredBlock++;
      await Bun.sleep(5);
    }
  } finally {
    for (const [path, text] of originals) writeFileSync(path, text);
    for (const dirId of createTargets) rmSync(join(absDir(manifest, dirId), options.fileNames[0] ?? "AGENTS.md"), { force: true });
    markTreeClean(manifest);
    await instance.hooks.dispose();
  }

  const result: FreshnessResult = {
    touchedDirs: options.touchedDirs,
    edit: series(edit.latencies, edit.polls, edit.timeouts),
    create: series(create.latencies, create.polls, create.timeouts),
    delete: series(deletion.latencies, deletion.polls, deletion.timeouts),
    agentEdit: series(agentEdit.latencies, agentEdit.polls, agentEdit.timeouts),
    createdTextShown,
    deleteRestoredBlock,
  };
  if (notes.length > 0) result.note = notes.join("; ");
  return result;
}

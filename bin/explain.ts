#!/usr/bin/env bun
/**
 * explain [dir] [--touch <path>]... [--worktree <dir>] [--system-tokens N] [--compaction-tokens N] [--delivery stable|system] [--no-host]
 *
 * Shows what the plugin gives a session in `dir` that touched the given paths, by running the same
 * engine the plugin's hooks run: the files that apply (priority order, tokens, why, and what the
 * model holds of each), the system block, what rides on each tool call, and the compaction copy.
 */
import { realpath, stat } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { tokensOf } from "../plugin/block/compose.ts";
import { Engine } from "../plugin/engine.ts";
import { createLogger } from "../plugin/log.ts";
import { resolveOptions } from "../plugin/options.ts";

const USAGE = `usage: explain [dir] [--touch <path>]... [--worktree <dir>] [options]

  dir                    the session directory (default: .)
  --touch <path>         a path the session touched, relative to dir (repeatable, in order)
  --worktree <dir>       the root no walk goes above (default: the enclosing git root, as OpenCode takes it)
  --system-tokens N      budget of the system block (default 8000)
  --delivery-tokens N    budget of what one step adds to tool outputs (default 6000)
  --compaction-tokens N  budget of the compaction copy (default 1000)
  --delivery MODE        stable (default) or system
  --no-host              show the blocks for a host that injects no instruction file itself
                         (by default, like OpenCode, the files from dir up to the root are the host's)`;

/** Runs `explain` with command-line arguments (without the command name); resolves to the exit code. */
export async function runExplain(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      touch: { type: "string", multiple: true, default: [] },
      worktree: { type: "string" },
      "system-tokens": { type: "string" },
      "delivery-tokens": { type: "string" },
      "compaction-tokens": { type: "string" },
      delivery: { type: "string" },
      "no-host": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help || positionals.length > 1) {
    console.log(USAGE);
    return values.help ? 0 : 2;
  }
  const directory = await realpath(resolve(positionals[0] ?? ".")).catch(() => undefined);
  if (directory === undefined) {
    console.error(`explain: no such directory: ${positionals[0]}`);
    return 2;
  }
  const worktree = values.worktree === undefined ? await gitRoot(directory) : resolve(values.worktree);
  const given: Record<string, unknown> = { watch: false };
  const numeric = { systemTokens: "system-tokens", deliveryTokens: "delivery-tokens", compactionTokens: "compaction-tokens" } as const;
  for (const [option, flag] of Object.entries(numeric)) if (values[flag] !== undefined) given[option] = Number(values[flag]);
  if (values.delivery !== undefined) given.delivery = values.delivery;
  const problems: string[] = [];
  const options = await resolveOptions(given, (message) => problems.push(message));
  for (const problem of problems) console.error(`explain: ${problem}`);

  const engine = await Engine.create({ directory, worktree, options, log: createLogger(undefined), client: undefined });
  try {
    const session = "explain";
    // The host's own prompt, as OpenCode builds it: its chain from the session directory up.
    const start = await engine.inspect(session);
    const hostFiles = values["no-host"] ? [] : start.hierarchy.files.filter((file) => start.hierarchy.dirSet.has(file.dir));
    const header = ["You are OpenCode.", ...hostFiles.map((file) => `Instructions from: ${join(worktree, file.rel)}\n${file.raw}`)].join("\n");
    const host = new Set(hostFiles.map((file) => file.path));

    console.log(`Session directory: ${directory}`);
    console.log(`Worktree:          ${worktree}`);
    console.log(`Delivery:          ${options.delivery}`);
    console.log(`Touched:           ${values.touch.length === 0 ? "(nothing yet)" : values.touch.join(", ")}\n`);

    const first = await engine.system(session, [header]);
    const rides: string[] = [];
    for (const [i, path] of values.touch.entries()) {
      engine.touch(session, "read", { filePath: path });
      const result = { output: "" };
      await engine.afterTool(session, "read", `explain-${i}`, { filePath: path }, result);
      rides.push(result.output.trim());
    }
    const { hierarchy, system, compaction } = await engine.inspect(session);
    const states = new Map(system.entries.map((entry) => [entry.key, entry.state]));

    console.log("Context files that apply (most important first: the chain of the latest touch, closest first):");
    if (hierarchy.files.length === 0) console.log("  (none)");
    for (const [i, file] of hierarchy.files.entries()) {
      const reasons: string[] = [];
      for (const [path, startDir] of hierarchy.starts) {
        if (engine.store.walkOf(startDir).includes(file.dir)) reasons.push(path === directory ? "on the session directory's path" : `applies to ${relative(directory, path)}`);
      }
      if (file.root) reasons.push("root: true (nothing above it applies below it)");
      const state = host.has(file.path) ? "in OpenCode's own prompt" : `${states.get(file.path) ?? "omitted"} in a system-delivery block`;
      console.log(`  ${file.rel}  ${await tokensOf(file)} tokens  tier ${hierarchy.tiers[i]}  ${state}; ${reasons.slice(0, 3).join("; ")}`);
    }
    console.log(`\nThe system block at the session's start (${options.delivery === "stable" ? "frozen until the next compaction" : "rebuilt every step"}):`);
    console.log(first === "" ? "(nothing: every file that applies is already in OpenCode's own prompt)" : first);
    if (options.delivery === "stable") {
      values.touch.forEach((path, i) => {
        console.log(`\nAppended to the output of the tool call that touched ${path}:`);
        console.log(rides[i] === "" ? "(nothing new)" : rides[i]);
      });
    } else {
      console.log(`\nThe system block after the touches (${system.tokens} of ${options.systemTokens} tokens):`);
      console.log(system.text === "" ? "(nothing)" : system.text);
    }
    console.log(`\nThe compaction copy (${compaction.tokens} of ${options.compactionTokens} tokens):`);
    console.log(compaction.text === "" ? "(nothing)" : compaction.text);
    return 0;
  } finally {
    await engine.dispose();
  }
}

/** The enclosing git root, as OpenCode takes it for the worktree; the directory itself outside git. */
async function gitRoot(directory: string): Promise<string> {
  for (let dir = directory; ; dir = dirname(dir)) {
    if (await stat(join(dir, ".git")).then(() => true, () => false)) return dir;
    if (dirname(dir) === dir) return directory;
  }
}

if (import.meta.main) {
  process.exitCode = await runExplain(process.argv.slice(2)).catch((error) => {
    console.error(`explain: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  });
}

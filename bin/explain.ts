#!/usr/bin/env bun
/**
 * explain [dir] [--touch <path>]... [--worktree <dir>] [--system-tokens N] [--no-host]
 *
 * Shows what the plugin gives a session in `dir` that touched the given paths: the tree of context
 * files that apply, each with its token count and why it applies, then the exact block the model gets.
 */
import { realpath } from "node:fs/promises";
import { dirname, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { walkUp } from "../plugin/discover.ts";
import { Engine } from "../plugin/engine.ts";
import { createLogger } from "../plugin/log.ts";
import { resolveOptions } from "../plugin/options.ts";
import { touchedDirectories } from "../plugin/paths.ts";
import { loadTokenizer } from "../plugin/tokens.ts";

const USAGE = `usage: explain [dir] [--touch <path>]... [--worktree <dir>] [--system-tokens N] [--compaction-tokens N] [--no-host]

  dir                    the session directory (default: .)
  --touch <path>         a path the session touched, relative to dir (repeatable)
  --worktree <dir>       the root no walk goes above (default: the enclosing git root, as OpenCode takes it)
  --system-tokens N      budget of the injected block (default 8000)
  --compaction-tokens N  budget of the compaction copy (default 1000)
  --no-host              show the block for a host that injects no instruction file itself
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
      "compaction-tokens": { type: "string" },
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
  const problems: string[] = [];
  const options = await resolveOptions(
    {
      watch: false,
      ...(values["system-tokens"] === undefined ? {} : { systemTokens: Number(values["system-tokens"]) }),
      ...(values["compaction-tokens"] === undefined ? {} : { compactionTokens: Number(values["compaction-tokens"]) }),
    },
    (message) => problems.push(message),
  );
  for (const problem of problems) console.error(`explain: ${problem}`);

  const engine = await Engine.create({ directory, worktree, options, log: createLogger(undefined), client: undefined });
  const session = "explain";
  for (const path of values.touch) engine.touch(session, "read", { filePath: path });
  const sessionFiles = await engine.current(session);
  const sessionWalk = walkUp(directory, engine.realRoot, options.maxDepth);
  const hostFiles = values["no-host"] ? [] : (sessionFiles?.files ?? []).filter((file) => sessionWalk.includes(file.dir));
  const header = ["You are OpenCode.", ...hostFiles.map((file) => `Instructions from: ${file.path}\n${file.text}`)].join("\n");
  const memo = await engine.blockFor(session, [header]);
  const copy = await engine.compactionCopy(session);
  await engine.dispose();
  if (memo === undefined) return 1;

  const touchedDirs = values.touch.flatMap((path) => touchedDirectories("read", { filePath: path }, directory, worktree).map((dir) => ({ path, dir })));
  const host = new Set(hostFiles.map((file) => file.path));
  console.log(`Session directory: ${directory}`);
  console.log(`Worktree:          ${worktree}`);
  console.log(`Touched:           ${values.touch.length === 0 ? "(nothing yet)" : values.touch.join(", ")}\n`);
  console.log("Context files that apply (root first):");
  if (memo.files.length === 0) console.log("  (none)");
  const tokenizer = await loadTokenizer();
  for (const file of memo.files) {
    const level = relative(engine.realRoot, file.dir).split("/").filter(Boolean).length;
    const reasons: string[] = [];
    if (sessionWalk.includes(file.dir)) reasons.push("on the session directory's path");
    for (const { path, dir } of touchedDirs) if (walkUp(dir, engine.realRoot, options.maxDepth).includes(file.dir)) reasons.push(`applies to touched ${path}`);
    if (file.root) reasons.push("root: true (nothing above it applies below it)");
    const state = host.has(file.path) ? "injected by OpenCode itself, left out of the block" : memo.whole.has(file.path) ? "in the block" : "in the block, cut to fit the budget";
    console.log(`${"  ".repeat(level + 1)}${file.rel}  ${tokenizer.count(file.text)} tokens  ${state}; ${reasons.join("; ")}`);
  }
  console.log(`\nThe block the model gets (${tokenizer.count(memo.block)} of ${options.systemTokens} tokens):`);
  console.log(memo.block === "" ? "(nothing: every file that applies is already in OpenCode's own prompt)" : memo.block);
  console.log(`\nThe compaction copy (${tokenizer.count(copy)} of ${options.compactionTokens} tokens):`);
  console.log(copy === "" ? "(nothing)" : copy);
  return 0;
}

/** The enclosing git root, as OpenCode takes it for the worktree; the directory itself outside git. */
async function gitRoot(directory: string): Promise<string> {
  for (let dir = directory; ; dir = dirname(dir)) {
    if (await Bun.file(`${dir}/.git`).exists().catch(() => false)) return dir;
    if (await Bun.file(`${dir}/.git/HEAD`).exists().catch(() => false)) return dir;
    if (dirname(dir) === dir) return directory;
  }
}

if (import.meta.main) {
  process.exitCode = await runExplain(process.argv.slice(2)).catch((error) => {
    console.error(`explain: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  });
}

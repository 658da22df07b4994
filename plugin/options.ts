import { contextNamesOf } from "./files/names.ts";
import type { z } from "zod";

/**
 * What a user may pass as the plugin's options (opencode.json `["opencode-project-context", {…}]`).
 * Every field is optional; `resolveOptions` turns it into a fully resolved `ResolvedOptions`.
 */
export interface ProjectContextOptions {
  /** Names looked for in each directory; the first that exists wins. */
  fileNames?: string[];
  /** How many levels a walk may climb above its start directory. */
  maxDepth?: number;
  /** Token budget of the injected `<project-context>` block. */
  systemTokens?: number;
  /** Token budget of the copy handed to the compaction summarizer. */
  compactionTokens?: number;
  /** Bytes read from one context file at most; the rest is cut. */
  maxFileBytes?: number;
  /** Directories remembered per session; the oldest touched is forgotten first. */
  maxTouchedDirs?: number;
  /** Keep the cache fresh with a file watcher; `false` validates by stat before every step instead. */
  watch?: boolean;
  /** Directories watched at most (the first needed); the others are checked by stat at every step boundary. */
  maxWatchedDirs?: number;
  /**
   * "stable" (default): the system block holds what the session had at its start (after a compaction:
   * its whole hierarchy then) and stays byte-identical until the next compaction; files reached
   * mid-way ride once on the tool output that reached them. "system": the block is rebuilt every step.
   */
  delivery?: "stable" | "system";
  /** Token budget of what one step may add to tool outputs and user messages (delivery "stable"). */
  deliveryTokens?: number;
  /** Bytes of context-file text the in-memory cache keeps at most; the least recently used goes first. */
  maxCacheBytes?: number;
  /** Append one JSON line per request to `<recordsDir>/<sessionID>.jsonl` (what context it had; never file text). */
  records?: boolean;
  /** Where the records go; "" (default): `$XDG_STATE_HOME/opencode-project-context`, else `~/.local/state/opencode-project-context`. */
  recordsDir?: string;
  /** Worktree-relative files or directories pinned in every session (as if loaded with the project_context tool). */
  pin?: string[];
  /** Worktree-relative globs of markdown rule files (like the rule folders of Cursor and Claude Code). */
  rules?: string[];
  /** Paths the worktree index examines at most (git ls-files, or a walk honouring .gitignore). */
  maxIndexEntries?: number;
  /** `include: agent` files attach to a user message when their score (0-1) is above this. */
  agentThreshold?: number;
  /** At most this many `include: agent` files attach to one user message. */
  agentTop?: number;
}

export type ResolvedOptions = Readonly<Required<ProjectContextOptions>>;

export const DEFAULT_OPTIONS: ResolvedOptions = Object.freeze({
  fileNames: Object.freeze(["AGENTS.md", "CLAUDE.md"]) as unknown as string[],
  maxDepth: 10,
  systemTokens: 8000,
  compactionTokens: 1000,
  maxFileBytes: 128 * 1024,
  maxTouchedDirs: 4096,
  watch: true,
  maxWatchedDirs: 8192,
  delivery: "stable",
  deliveryTokens: 6000,
  maxCacheBytes: 32 * 1024 * 1024,
  records: true,
  recordsDir: "",
  pin: Object.freeze([]) as unknown as string[],
  rules: Object.freeze([".opencode/rules/**/*.md"]) as unknown as string[],
  maxIndexEntries: 200_000,
  agentThreshold: 0.2,
  agentTop: 2,
});

type Field = keyof ProjectContextOptions;
const FIELDS = Object.keys(DEFAULT_OPTIONS) as Field[];

/** A file name's longest, in bytes, on Linux and macOS. */
const NAME_MAX_BYTES = 255;

function longestVariantBytes(name: string): number {
  const { base, override, local } = contextNamesOf([name]);
  return Math.max(...[...base, ...override, ...local].map((variant) => new TextEncoder().encode(variant).length));
}

function schemaOf({ z }: typeof import("zod")): { [K in Field]: z.ZodType } {
  const fileName = z
    .string()
    .min(1)
    .max(255)
    .refine((name) => !/[\\/\0]/.test(name) && name !== "." && name !== "..", "must be a plain file name, not a path")
    // The file system's limit is in bytes, and each name brings its .local.md and .override.md variants.
    .refine((name) => longestVariantBytes(name) <= NAME_MAX_BYTES, `must be short enough that its .override.md variant fits a file name (${NAME_MAX_BYTES} bytes of UTF-8)`);
  return {
    fileNames: z.array(fileName).min(1).max(16),
    maxDepth: z.number().int().min(0).max(64),
    systemTokens: z.number().int().min(0).max(1_000_000),
    compactionTokens: z.number().int().min(0).max(1_000_000),
    maxFileBytes: z.number().int().min(1024).max(64 * 1024 * 1024),
    maxTouchedDirs: z.number().int().min(1).max(1_000_000),
    watch: z.boolean(),
    maxWatchedDirs: z.number().int().min(0).max(100_000),
    delivery: z.enum(["stable", "system"]),
    deliveryTokens: z.number().int().min(0).max(1_000_000),
    maxCacheBytes: z.number().int().min(1024 * 1024).max(4 * 1024 * 1024 * 1024),
    records: z.boolean(),
    recordsDir: z.string().max(4096).refine((dir) => !dir.includes("\0"), "must not contain NUL"),
    pin: z
      .array(z.string().min(1).max(4096).refine((path) => !path.includes("\0"), "must not contain NUL"))
      .max(256),
    rules: z.array(z.string().min(1).max(1024)).max(64),
    maxIndexEntries: z.number().int().min(0).max(10_000_000),
    agentThreshold: z.number().min(0).max(1),
    agentTop: z.number().int().min(0).max(32),
  };
}

/**
 * Validates each option on its own, so one bad value costs only that value: it is reported
 * through `warn` and its default used, while the valid ones still apply. Unknown keys are
 * reported too (most often a typo). The caller's object is never mutated. zod is loaded only when
 * there are options to check: it costs ~20 ms of start-up, more than the whole plugin may.
 */
export async function resolveOptions(raw: unknown, warn: (message: string) => void): Promise<ResolvedOptions> {
  if (raw === undefined || raw === null) return DEFAULT_OPTIONS;
  if (typeof raw !== "object" || Array.isArray(raw)) {
    warn(`options must be an object, got ${Array.isArray(raw) ? "an array" : typeof raw}; using the defaults`);
    return DEFAULT_OPTIONS;
  }
  const given = raw as Record<string, unknown>;
  if (Object.keys(given).length === 0) return DEFAULT_OPTIONS;
  const fields = schemaOf(await import("zod"));
  const resolved: Record<string, unknown> = { ...DEFAULT_OPTIONS };
  for (const key of Object.keys(given)) {
    if (!FIELDS.includes(key as Field)) {
      warn(`unknown option "${key}" ignored; known options: ${FIELDS.join(", ")}`);
      continue;
    }
    const field = key as Field;
    const parsed = fields[field].safeParse(given[key]);
    if (parsed.success) {
      resolved[field] = Array.isArray(parsed.data) ? Object.freeze([...parsed.data]) : parsed.data;
    } else {
      const reason = parsed.error.issues.map((issue) => issue.message).join("; ");
      warn(`option "${key}" is invalid (${reason}); using the default ${JSON.stringify(DEFAULT_OPTIONS[field])}`);
    }
  }
  return Object.freeze(resolved) as unknown as ResolvedOptions;
}

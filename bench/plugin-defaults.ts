/**
 * The plugin defaults the baselines and the expected-content checks must agree with
 * (plugin/options.ts DEFAULT_OPTIONS). Kept here rather than imported so the bench still runs,
 * and its baselines still measure, when the plugin is absent or mid-rewrite.
 */
const SYSTEM_TOKENS = 8000;

export const DEFAULT_OPTIONS_FOR_BENCH = {
  fileNames: ["AGENTS.md", "CLAUDE.md"] as readonly string[],
  maxDepth: 10,
  systemTokens: SYSTEM_TOKENS,
  /** The baselines cap by characters (≈4 per token) so they are not charged for tokenizing. */
  budgetChars: SYSTEM_TOKENS * 4,
} as const;

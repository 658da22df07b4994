// What tests/fixtures/e2e-monorepo holds: each context file with the one marker line that identifies
// its content wherever it reaches the model.

export type ContextFile = { path: string; marker: string };

const file = (path: string, marker: string): ContextFile => ({ path, marker });

export const ROOT = file("AGENTS.md", "CTX-ROOT:");
export const WEB = file("packages/web/AGENTS.md", "CTX-WEB:");
export const COMPONENTS = file("packages/web/src/components/AGENTS.md", "CTX-COMPONENTS:");
export const API = file("packages/api/AGENTS.md", "CTX-API:");
/** The only context file of its directory is a CLAUDE.md. */
export const LEGACY = file("packages/legacy/CLAUDE.md", "CTX-LEGACY:");
export const MOBILE = file("packages/mobile/AGENTS.md", "CTX-MOBILE:");
export const AUTH = file("services/auth/AGENTS.md", "CTX-AUTH:");
export const SEARCH = file("services/search/AGENTS.md", "CTX-SEARCH:");
/** Below SEARCH: a touch under services/search/src brings two files at once. */
export const SEARCH_SRC = file("services/search/src/AGENTS.md", "CTX-SEARCH-SRC:");
/** No scenario touches services/billing: its file must never show. */
export const BILLING = file("services/billing/AGENTS.md", "CTX-BILLING:");

export const NESTED_FILES = [WEB, COMPONENTS, API, LEGACY, MOBILE, AUTH, SEARCH, SEARCH_SRC, BILLING];

/** Three directories below packages/web/src/components/AGENTS.md. */
export const DEEP_SOURCE = "packages/web/src/components/forms/deep/Field.tsx";

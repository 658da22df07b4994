import type { Logger } from "../log.ts";

/**
 * Wraps a hook so that nothing it does can throw or reject into OpenCode: a failure is logged
 * (once per distinct message) and the agent goes on without this step's context.
 */
export function guard<Args extends unknown[]>(
  log: Logger,
  name: string,
  hook: (...args: Args) => Promise<void> | void,
): (...args: Args) => Promise<void> {
  return async (...args) => {
    try {
      await hook(...args);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      log.once(`${name}:${message}`, "error", `${name} failed: ${message}`);
    }
  };
}

/**
 * Tags a context file must not be able to open or close: the block's own, and the ones hosts use
 * to frame instructions. A file that writes `</project-context>` would otherwise end the block early
 * and have its remaining text read as if the user or OpenCode had written it.
 */
const FRAMING_TAG = /<(\s*\/?\s*)(project-context|context-file|system-reminder|system|instructions)(?=[\s/>]|$)/gi;

/** Neutralizes framing tags in file text (`<` becomes `&lt;`); everything else is left as written. */
export function escapeText(text: string): string {
  return text.replace(FRAMING_TAG, "&lt;$1$2");
}

/** Makes a path safe inside a double-quoted attribute. */
export function escapeAttribute(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/[\r\n]/g, " ");
}

// Reading the plugin's effect off the requests the scripted model server recorded: every e2e
// scenario is judged only on what the model would have seen.

import { systemMessages, textOf, type ChatMessage, type RecordedRequest } from "./model-server.ts";

const BLOCK_OPEN = "<project-context>";
const CONTEXT_FILE_PATH = /<context-file path="([^"]+)"/g;

/** System messages holding a `<project-context>` block (the plugin pushes at most one). */
function contextBlocks(request: RecordedRequest): string[] {
  return systemMessages(request.body).filter((message) => message.includes(BLOCK_OPEN));
}

/** The request's one `<project-context>` system message, or undefined; more than one is an error. */
export function contextBlock(request: RecordedRequest): string | undefined {
  const blocks = contextBlocks(request);
  if (blocks.length > 1) throw new Error(`request #${request.index} carries ${blocks.length} <project-context> blocks`);
  return blocks[0];
}

/** Relative paths of the `<context-file>` sections of a text, in order. */
export function sectionPaths(text: string): string[] {
  return [...text.matchAll(CONTEXT_FILE_PATH)].map((match) => match[1] ?? "");
}

/** Relative paths of the `<context-file>` sections of the request's system block, in order. */
export function contextFilePaths(request: RecordedRequest): string[] {
  return sectionPaths(contextBlock(request) ?? "");
}

export function toolOutputs(request: RecordedRequest): string[] {
  return request.body.messages.filter((message) => message.role === "tool").map((message) => textOf(message.content));
}

/** The newest tool output of the request: what the step before it returned (its last tool call). */
export function lastToolOutput(request: RecordedRequest): string {
  const outputs = toolOutputs(request);
  const last = outputs[outputs.length - 1];
  if (last === undefined) throw new Error(`request #${request.index} has no tool output`);
  return last;
}

export function userTexts(request: RecordedRequest): string[] {
  return request.body.messages.filter((message) => message.role === "user").map((message) => textOf(message.content));
}

/**
 * Where context reaches the model: system messages, tool outputs and user messages (the compaction
 * prompt and summary). Assistant tool-call arguments are left out: an agent's own edit of a context
 * file legitimately repeats the new text there.
 */
function contextCarriers(request: RecordedRequest): ChatMessage[] {
  return request.body.messages.filter((message) => message.role !== "assistant");
}

/** How often `needle` reaches the model in this request. */
export function occurrences(request: RecordedRequest, needle: string): number {
  return contextCarriers(request).reduce((count, message) => count + textOf(message.content).split(needle).length - 1, 0);
}

/** Where `needle` reaches the model in this request: one role per copy ("system", "tool", "user"). */
export function placesOf(request: RecordedRequest, needle: string): string[] {
  return contextCarriers(request).flatMap((message) => Array(textOf(message.content).split(needle).length - 1).fill(message.role) as string[]);
}

/** The request at `position` of a list, failing the test with a clear message when it is missing. */
export function nth(requests: RecordedRequest[], position: number): RecordedRequest {
  const request = requests[position];
  if (!request) throw new Error(`expected a request at position ${position}, only ${requests.length} recorded`);
  return request;
}

/** Files whose marker reaches the model more than once in the request, with their count (none: every file at most once). */
export function repeated(request: RecordedRequest, files: readonly { path: string; marker: string }[]): string[] {
  return files.flatMap((file) => {
    const count = occurrences(request, file.marker);
    return count > 1 ? [`request #${request.index}: ${file.path} x${count}`] : [];
  });
}

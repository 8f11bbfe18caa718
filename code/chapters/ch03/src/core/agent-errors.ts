import type { ChatMessage } from "./messages.js";

/** Every way a run can end without a final answer. Callers catch this one base class. */
export class AgentRunError extends Error {
  override readonly name: string = "AgentRunError";
  /** The conversation up to the failure, filled in by the runner, so it can still be saved. */
  history: readonly ChatMessage[] = [];
}

/** The model still wanted tools after `maxTurns` model calls. */
export class AgentLimitError extends AgentRunError {
  override readonly name = "AgentLimitError";
  constructor(readonly maxTurns: number) {
    super(`The agent did not finish within ${maxTurns} turns`);
  }
}

/** The reply was cut short (length), filtered, or stopped with neither text nor tool calls. */
export class IncompleteModelReplyError extends AgentRunError {
  override readonly name = "IncompleteModelReplyError";
  constructor(readonly finishReason: string) {
    super(`The model's reply was incomplete (finish_reason: ${finishReason})`);
  }
}

/** The provider could not be reached, refused the request, timed out, or sent an unusable reply. */
export class ModelCallError extends AgentRunError {
  override readonly name = "ModelCallError";
}

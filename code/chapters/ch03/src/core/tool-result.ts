/**
 * What a tool call gives back to the model. Failures the model can act on are values with a
 * stable `errorCode`, never exceptions: the model reads `content`, a program reads the code.
 */
export interface ToolResult {
  /** Text placed in the `tool` message the model reads next. */
  readonly content: string;
  readonly isError: boolean;
  /** Stable, machine-readable cause; present exactly when `isError` is true. */
  readonly errorCode?: string;
}

export function toolSuccess(content: string): ToolResult {
  return Object.freeze({ content, isError: false });
}

export function toolError(code: string, message: string): ToolResult {
  return Object.freeze({ content: `Error [${code}]: ${message}`, isError: true, errorCode: code });
}

export function isToolResult(value: unknown): value is ToolResult {
  if (typeof value !== "object" || value === null) return false;
  const candidate = value as Record<string, unknown>;
  if (typeof candidate.content !== "string" || typeof candidate.isError !== "boolean") return false;
  if (!candidate.isError) return true;
  return typeof candidate.errorCode === "string" && candidate.errorCode.length > 0;
}

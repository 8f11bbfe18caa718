/** What the user is shown before a tool call runs. */
export interface ApprovalRequest {
  readonly toolName: string;
  readonly reason: string;
  readonly arguments: Readonly<Record<string, unknown>>;
}

/**
 * Asks a human whether one tool call may run. Only `true` lets it run; `false` or a throw
 * refuses it. Chapter 3 shows why a yes/no answer is too poor a type for a permission system.
 */
export interface ApprovalProvider {
  approve(request: ApprovalRequest): Promise<boolean>;
}

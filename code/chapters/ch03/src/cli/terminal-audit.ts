import type { AuditSink, PermissionDecision, PermissionRequest } from "../core/permissions.js";
import type { Terminal } from "./terminal.js";
import { visible } from "./visible.js";

/** Prints every final permission decision, one line each, as the policy records it. */
export class TerminalAuditSink implements AuditSink {
  constructor(private readonly terminal: Terminal) {}

  record(request: PermissionRequest, decision: PermissionDecision): void {
    const line = `[Permission] ${request.toolName}: ${decision.behavior} (${decision.source}) - ${decision.reason}`;
    this.terminal.line(visible(line));
  }
}

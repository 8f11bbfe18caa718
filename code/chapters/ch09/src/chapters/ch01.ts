#!/usr/bin/env node
import { runCli } from "../cli.js";

// The fixed entry of chapter 1: the unified CLI with `run --chapter 1` put in front.
process.exitCode = await runCli(["run", "--chapter", "1", ...process.argv.slice(2)], undefined, "ch01");

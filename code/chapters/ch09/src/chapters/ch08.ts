#!/usr/bin/env node
import { runProfile } from "../cli.js";
import { P08 } from "../core/profiles.js";

process.exitCode = await runProfile(P08, process.argv.slice(2));

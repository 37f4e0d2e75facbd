/* esbxd: the gateway's routes between a git project and another
   repository (push-git, pull-git).  */
#ifndef ESBX_PLUGIN_GATEWAY_ROUTES_GIT_H
#define ESBX_PLUGIN_GATEWAY_ROUTES_GIT_H

#include "request.h"

/* POST /v1/projects/P/push-git {"remote", "branch", "secret"} and
   /pull-git {"remote", "ref", "secret"}: the views of
   esbx_project_push_git and esbx_project_pull_git.  */
void esbx_gateway_project_push_git (struct esbx_gateway_ctx *ctx);
void esbx_gateway_project_pull_git (struct esbx_gateway_ctx *ctx);

#endif

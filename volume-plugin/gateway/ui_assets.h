/* The dashboard's files (volume-plugin/ui/), compiled into esbxd by
   cmake/embed.cmake.  */
#ifndef ESBX_PLUGIN_GATEWAY_UI_ASSETS_H
#define ESBX_PLUGIN_GATEWAY_UI_ASSETS_H

#include <stddef.h>

struct esbx_ui_asset
{
  const char *path; /* "/ui/app.js" */
  const char *content_type;
  const unsigned char *data;
  size_t len;
};

extern const struct esbx_ui_asset esbx_ui_assets[];
extern const size_t esbx_ui_n_assets;

#endif

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The namespace import "DMA_BUF" in the .modinfo form every kernel's modpost and
 * module loader read: a NUL-terminated "import_ns=DMA_BUF" in section .modinfo
 * (linux:include/linux/moduleparam.h __MODULE_INFO). Forced in front of one
 * object of a tree (tests/usb4/lib/trees.sh usb4_tree_glue) that writes the
 * import as MODULE_IMPORT_NS("DMA_BUF"), the string form of 6.13+: built for
 * 6.12, whose macro stringifies its argument again (linux:include/linux/module.h),
 * that lands as import_ns="DMA_BUF" with the quotes, which modpost does not
 * match. This header includes nothing, so the tree's own pr_fmt and headers
 * come after it unchanged; the tree is not touched.
 */
#ifndef USB4_GLUE_IMPORT_NS_DMA_BUF_H
#define USB4_GLUE_IMPORT_NS_DMA_BUF_H

static const char usb4_glue_import_ns_dma_buf[]
	__attribute__((used, section(".modinfo"), aligned(1))) = "import_ns=DMA_BUF";

#endif
